package aws

import (
	"context"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// DRADriverTag names the DRA driver the nodes of an Auto Scaling group run
// (a node-template tag, like the label/, taint/ and resources/ ones; the
// counterpart of Cluster API's capacity.cluster-autoscaler.kubernetes.io/dra-driver
// annotation). With a driver this provider knows, the group's template
// publishes the ResourceSlice that driver publishes on such a node, built
// from the instance type's accelerators (DescribeInstanceTypes), and has no
// extended GPU resource (a node runs the DRA driver or the device plugin,
// not both; a resources/ tag may add one back).
const DRADriverTag = "k8s.io/cluster-autoscaler/node-template/dra-driver"

// The DRA drivers whose devices a template can publish.
const (
	// NVIDIADRADriver is NVIDIA's GPU driver (kubernetes-sigs/dra-driver-nvidia-gpu).
	NVIDIADRADriver = "gpu.nvidia.com"
	// NeuronDRADriver is AWS's Neuron driver (Inferentia and Trainium).
	NeuronDRADriver = "neuron.aws.com"
)

// nvidiaGPU is what NVIDIA's driver reports of one GPU model that
// DescribeInstanceTypes cannot tell: the product name NVML gives, the
// architecture and the CUDA compute capability.
type nvidiaGPU struct {
	product, arch, compute string
}

// nvidiaGPUs maps the lower-cased GPU names of DescribeInstanceTypes to
// what the driver publishes; products whose name depends on the memory
// size are resolved in nvidiaProduct.
var nvidiaGPUs = map[string]nvidiaGPU{
	"a100": {"NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0"},
	"a10g": {"NVIDIA A10G", "Ampere", "8.6.0"},
	"h100": {"NVIDIA H100 80GB HBM3", "Hopper", "9.0.0"},
	"h200": {"NVIDIA H200", "Hopper", "9.0.0"},
	"l4":   {"NVIDIA L4", "Ada Lovelace", "8.9.0"},
	"l40s": {"NVIDIA L40S", "Ada Lovelace", "8.9.0"},
	"t4":   {"Tesla T4", "Turing", "7.5.0"},
	"t4g":  {"NVIDIA T4G", "Turing", "7.5.0"},
	"v100": {"Tesla V100-SXM2-16GB", "Volta", "7.0.0"},
	"b200": {"NVIDIA B200", "Blackwell", "10.0.0"},
	"m60":  {"Tesla M60", "Maxwell", "5.2.0"},
	"k80":  {"Tesla K80", "Kepler", "3.7.0"},
}

// nvidiaProduct is the GPU of type t as NVIDIA's driver names it; a model
// missing from nvidiaGPUs is "NVIDIA <name>" without architecture and
// compute capability.
func nvidiaProduct(t instanceType) nvidiaGPU {
	name := strings.ToLower(strings.TrimSpace(t.GPUName))
	if name == "" || t.GPUModelsDiffer {
		return nvidiaGPU{} // types of several models (minimumType): nothing model-specific
	}
	g, ok := nvidiaGPUs[name]
	if !ok {
		return nvidiaGPU{product: "NVIDIA " + strings.TrimSpace(t.GPUName)}
	}
	switch {
	case name == "a100" && t.GPUMemoryMiB > 40960:
		g.product = "NVIDIA A100-SXM4-80GB"
	case name == "v100" && t.GPUMemoryMiB > 16384:
		g.product = "Tesla V100-SXM2-32GB"
	}
	return g
}

// draTemplateSlices returns the ResourceSlices a node of type t named
// nodeName publishes when it runs DRA driver, or, with none, why not (a
// driver this provider does not know, or a type without its devices).
// The slice has the shape of cloudprovider.GPUTemplateSlices: one pool
// named after the node, in one slice.
func draTemplateSlices(nodeName, driver string, t instanceType) ([]*resourceapi.ResourceSlice, string) {
	if errs := validation.IsDNS1123Subdomain(driver); len(errs) > 0 {
		return nil, fmt.Sprintf("tag %s: %q is not a DRA driver name (%s)", DRADriverTag, driver, strings.Join(errs, "; "))
	}
	var devices []resourceapi.Device
	switch driver {
	case NVIDIADRADriver:
		if t.GPUs == 0 || !strings.EqualFold(strings.TrimSpace(t.GPUManufacturer), "NVIDIA") {
			return nil, fmt.Sprintf("instance type %s has no NVIDIA GPU for DRA driver %s", t.Name, driver)
		}
		devices = nvidiaDevices(t)
	case NeuronDRADriver:
		if t.NeuronDevices == 0 {
			return nil, fmt.Sprintf("instance type %s has no Neuron device for DRA driver %s", t.Name, driver)
		}
		devices = neuronDevices(t)
	default:
		return nil, fmt.Sprintf("tag %s: DRA driver %q is not one whose devices this provider knows (%s, %s)",
			DRADriverTag, driver, NVIDIADRADriver, NeuronDRADriver)
	}
	if len(devices) > cloudprovider.MaxSliceDevices {
		return nil, fmt.Sprintf("instance type %s has %d devices of DRA driver %s, more than one ResourceSlice holds (%d)",
			t.Name, len(devices), driver, cloudprovider.MaxSliceDevices)
	}
	sl := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: &nodeName, Devices: devices,
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1}},
	}
	return []*resourceapi.ResourceSlice{sl}, ""
}

func stringAttr(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{StringValue: &s}
}

// nvidiaDevices are the full GPUs NVIDIA's driver publishes: gpu-<i>, with
// the attributes type, productName, architecture and cudaComputeCapability
// and the capacity memory (the per-GPU memory DescribeInstanceTypes
// gives). What depends on the very machine (uuid, PCI addresses, driver
// versions) is left out.
func nvidiaDevices(t instanceType) []resourceapi.Device {
	g := nvidiaProduct(t)
	out := make([]resourceapi.Device, 0, t.GPUs)
	for i := int64(0); i < t.GPUs; i++ {
		d := resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": stringAttr("gpu")}}
		if g.product != "" {
			d.Attributes["productName"] = stringAttr(g.product)
		}
		if g.arch != "" {
			d.Attributes["architecture"] = stringAttr(g.arch)
		}
		if g.compute != "" {
			v := g.compute
			d.Attributes["cudaComputeCapability"] = resourceapi.DeviceAttribute{VersionValue: &v}
		}
		if t.GPUMemoryMiB > 0 {
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(t.GPUMemoryMiB*1024*1024, resource.BinarySI)}}
		}
		out = append(out, d)
	}
	return out
}

// neuronDevices are the Neuron devices AWS's driver publishes:
// neuron-device-<i>, with the attributes deviceId, instanceType and
// resourceType neuron_device. Topology and version attributes, which
// depend on the very machine, are left out.
func neuronDevices(t instanceType) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, t.NeuronDevices)
	for i := int64(0); i < t.NeuronDevices; i++ {
		id := i
		out = append(out, resourceapi.Device{Name: fmt.Sprintf("neuron-device-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"deviceId":     {IntValue: &id},
				"instanceType": stringAttr(t.Name),
				"resourceType": stringAttr("neuron_device"),
			}})
	}
	return out
}

// hasDRADevices reports whether the template of a group with tags and type
// t publishes its accelerators as DRA devices (and so without the extended
// GPU resource).
func hasDRADevices(tags map[string]string, t instanceType) bool {
	driver := strings.TrimSpace(tags[DRADriverTag])
	switch driver {
	case NVIDIADRADriver:
		return t.GPUs > 0 && strings.EqualFold(strings.TrimSpace(t.GPUManufacturer), "NVIDIA")
	case NeuronDRADriver:
		return t.NeuronDevices > 0
	}
	return false
}

// templateSlices returns the ResourceSlices of the template node nodeName
// of group d (instance type t): none without a dra-driver tag; with one
// that gives none, an Info log says why, once per group, driver and type.
func (p *Provider) templateSlices(ctx context.Context, d *groupDesc, nodeName string, t instanceType) []*resourceapi.ResourceSlice {
	driver := strings.TrimSpace(d.Tags[DRADriverTag])
	if driver == "" {
		return nil
	}
	slices, why := draTemplateSlices(nodeName, driver, t)
	if why == "" {
		return slices
	}
	// The fact cache's once-per-key log set (zones.go) holds these notes
	// too, under keys of their own.
	key := "dra-driver/" + d.Name + "/" + driver + "/" + t.Name
	c := p.facts
	c.mu.Lock()
	logged := c.zoneFallbackLogged[key]
	c.zoneFallbackLogged[key] = true
	c.mu.Unlock()
	if !logged {
		klog.FromContext(ctx).Info("Template publishes no DRA devices for the Auto Scaling group", "nodeGroup", d.Name,
			"driver", driver, "instanceType", t.Name, "reason", why)
	}
	return nil
}
