package cloudprovider

import (
	"context"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// DefaultGPUResource is the extended resource of device-plugin GPUs when
// nothing names another (upstream's default, NVIDIA's).
const DefaultGPUResource apiv1.ResourceName = "nvidia.com/gpu"

// GPUResourceNames returns the extended resources counted as GPUs wherever
// GPUs are counted (--gpu-total, the scale-down GPU utilisation, the
// readiness of GPU nodes, the GPU metrics' labels): upstream's list. This is
// the one place that lists them.
func GPUResourceNames() []apiv1.ResourceName {
	return []apiv1.ResourceName{DefaultGPUResource, "amd.com/gpu", "gpu.intel.com/xe", "habana.ai/gaudi",
		"microsoft.com/directx"}
}

// IsGPUResource reports whether name is one of GPUResourceNames.
func IsGPUResource(name apiv1.ResourceName) bool {
	for _, n := range GPUResourceNames() {
		if n == name {
			return true
		}
	}
	return false
}

// GPUResourceIn returns the first of GPUResourceNames with a positive
// quantity in l, or "" when there is none.
func GPUResourceIn(l apiv1.ResourceList) apiv1.ResourceName {
	for _, n := range GPUResourceNames() {
		if q, ok := l[n]; ok && q.Sign() > 0 {
			return n
		}
	}
	return ""
}

// NodeGPUResource returns the GPU resource node has (its capacity, then its
// allocatable), or DefaultGPUResource when it has none, as a GPU node whose
// device plugin has not started yet.
func NodeGPUResource(n *apiv1.Node) apiv1.ResourceName {
	if n == nil {
		return DefaultGPUResource
	}
	if r := GPUResourceIn(n.Status.Capacity); r != "" {
		return r
	}
	if r := GPUResourceIn(n.Status.Allocatable); r != "" {
		return r
	}
	return DefaultGPUResource
}

// LabelledGPUConfig is the GPU configuration of node for a provider that
// tells GPU nodes by label: nil when node lacks the label, else the
// label's value as type and node's GPU resource (NodeGPUResource).
func LabelledGPUConfig(label string, node *apiv1.Node) *GpuConfig {
	if label == "" || node == nil {
		return nil
	}
	t, ok := node.Labels[label]
	if !ok {
		return nil
	}
	return &GpuConfig{Label: label, Type: t, ExtendedResourceName: NodeGPUResource(node)}
}

// GPUsOf returns the GPU type of node, as the provider names it, and how
// many it has (0 without GPU).
func GPUsOf(ctx context.Context, provider CloudProvider, n *apiv1.Node) (string, int64) {
	return GPUsWithDevices(ctx, provider, n, nil)
}

// GPUsWithDevices is GPUsOf for a node (or a node group's template) whose
// DRA drivers publish slices: a node without an extended GPU resource counts
// the GPU devices of its node-local slices (see IsGPUDevice), under the GPU
// type the provider tells for the node or, when it tells none, under the
// name of the devices' driver. That type is what --gpu-total names.
func GPUsWithDevices(ctx context.Context, provider CloudProvider, n *apiv1.Node, slices []*resourceapi.ResourceSlice) (string, int64) {
	if provider == nil || n == nil {
		return "", 0
	}
	c := provider.GetNodeGpuConfig(ctx, n)
	typ, draDriver := "", ""
	if c != nil {
		typ, draDriver = c.Type, c.DraDriverName
		name := c.ExtendedResourceName
		if name == "" {
			name = NodeGPUResource(n)
		}
		if q, ok := n.Status.Capacity[name]; ok && q.Value() > 0 {
			return typ, q.Value()
		}
	}
	driver, count := GPUDevices(slices, draDriver)
	if count == 0 {
		return typ, 0
	}
	if typ == "" {
		typ = driver
	}
	return typ, count
}

// GPUDevices counts the GPU devices of slices (IsGPUDevice) and names the
// driver of the first; providerDriver is the provider's DRA GPU driver for
// the node ("" when it has none).
func GPUDevices(slices []*resourceapi.ResourceSlice, providerDriver string) (driver string, count int64) {
	for _, sl := range slices {
		if sl == nil {
			continue
		}
		for i := range sl.Spec.Devices {
			if IsGPUDevice(sl.Spec.Driver, providerDriver, &sl.Spec.Devices[i]) {
				if driver == "" {
					driver = sl.Spec.Driver
				}
				count++
			}
		}
	}
	return driver, count
}

// IsGPUDriver tells whether the devices of a DRA driver are GPUs: the
// provider's DRA GPU driver for the node, or a driver whose name's first DNS
// label begins with "gpu" (gpu.nvidia.com, gpu.intel.com, gpu.amd.com, the
// example driver's gpu.example.com), the drivers' naming convention; the
// DeviceClasses that select them are conventionally named the same.
func IsGPUDriver(driver, providerDriver string) bool {
	if driver == "" {
		return false
	}
	if driver == providerDriver {
		return true
	}
	first, _, _ := strings.Cut(driver, ".")
	return strings.HasPrefix(first, "gpu")
}

// IsGPUDevice tells whether a device of driver is a GPU: a device whose
// "type" attribute is "gpu", whatever its driver (NVIDIA's driver and
// upstream's Cluster API templates mark GPUs so), or a GPU driver's
// (IsGPUDriver) device without a "type" attribute. A GPU driver's device of
// another type (a MIG partition, type "mig") is not a GPU of its own.
func IsGPUDevice(driver, providerDriver string, d *resourceapi.Device) bool {
	typ, typed := deviceType(d)
	if typed {
		return typ == "gpu" && driver != ""
	}
	return IsGPUDriver(driver, providerDriver)
}

// deviceType returns the device's "type" attribute (unqualified, or
// qualified by any domain) when it is a string.
func deviceType(d *resourceapi.Device) (string, bool) {
	for name, a := range d.Attributes {
		if name == "type" || strings.HasSuffix(string(name), "/type") {
			if a.StringValue == nil {
				return "", true
			}
			return *a.StringValue, true
		}
	}
	return "", false
}
