package cloudprovider_test

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

func gpuSlice(driver string, types ...string) *resourceapi.ResourceSlice {
	sl := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("n")}}
	for i, typ := range types {
		d := resourceapi.Device{Name: "d" + string(rune('0'+i))}
		if typ != "" {
			d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr.To(typ)}}
		}
		sl.Spec.Devices = append(sl.Spec.Devices, d)
	}
	return sl
}

// TestGPUsWithDevices: --gpu-total counts the GPU devices of a node's DRA
// slices when it has no extended GPU resource, under the provider's GPU type
// for the node or else the driver's name; other drivers' devices and MIG
// partitions are not GPUs.
func TestGPUsWithDevices(t *testing.T) {
	ctx := context.Background()
	node := func(labels map[string]string, extended string) *apiv1.Node {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels},
			Status: apiv1.NodeStatus{Capacity: apiv1.ResourceList{}}}
		if extended != "" {
			n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse(extended)
		}
		return n
	}
	labelled := map[string]string{"fake.gpu/type": "a100"}
	for _, tc := range []struct {
		name      string
		node      *apiv1.Node
		slices    []*resourceapi.ResourceSlice
		wantType  string
		wantCount int64
	}{
		{name: "no GPU", node: node(nil, "")},
		{name: "extended resource", node: node(labelled, "4"), wantType: "a100", wantCount: 4},
		{name: "extended resource wins over slices", node: node(labelled, "4"),
			slices: []*resourceapi.ResourceSlice{gpuSlice("gpu.nvidia.com", "gpu", "gpu")}, wantType: "a100", wantCount: 4},
		{name: "DRA GPUs under the node's GPU type", node: node(labelled, ""),
			slices: []*resourceapi.ResourceSlice{gpuSlice("gpu.nvidia.com", "gpu", "gpu", "gpu")}, wantType: "a100", wantCount: 3},
		{name: "DRA GPUs without a GPU label: the driver's name", node: node(nil, ""),
			slices: []*resourceapi.ResourceSlice{gpuSlice("gpu.example.com", "", "")}, wantType: "gpu.example.com", wantCount: 2},
		{name: "a unique gpu-prefixed driver", node: node(nil, ""),
			slices: []*resourceapi.ResourceSlice{gpuSlice("gpu-x1.example.com", "")}, wantType: "gpu-x1.example.com", wantCount: 1},
		{name: "MIG partitions are not GPUs", node: node(nil, ""),
			slices: []*resourceapi.ResourceSlice{gpuSlice("gpu.nvidia.com", "gpu", "mig", "mig")}, wantType: "gpu.nvidia.com", wantCount: 1},
		{name: "a device of type gpu is a GPU whatever its driver", node: node(nil, ""),
			slices:   []*resourceapi.ResourceSlice{gpuSlice("accel.example.com", "gpu", "gpu", "nic")},
			wantType: "accel.example.com", wantCount: 2},
		{name: "a NIC driver's devices are not GPUs", node: node(nil, ""),
			slices: []*resourceapi.ResourceSlice{gpuSlice("dra.net", "", ""), gpuSlice("tpu.google.com", "")}},
		{name: "several slices of one driver add up", node: node(nil, ""),
			slices:   []*resourceapi.ResourceSlice{gpuSlice("gpu.example.com", ""), gpuSlice("gpu.example.com", "", "")},
			wantType: "gpu.example.com", wantCount: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, count := cloudprovider.GPUsWithDevices(ctx, fakeprovider.NewProvider(), tc.node, tc.slices)
			if typ != tc.wantType || count != tc.wantCount {
				t.Errorf("GPUsWithDevices = %q, %d; want %q, %d", typ, count, tc.wantType, tc.wantCount)
			}
		})
	}
}

func TestIsGPUDriver(t *testing.T) {
	for _, tc := range []struct {
		driver, providerDriver string
		want                   bool
	}{
		{"gpu.nvidia.com", "", true},
		{"gpu.intel.com", "", true},
		{"gpu.example.com", "", true},
		{"compute-domain.nvidia.com", "", false},
		{"tpu.google.com", "", false},
		{"tpu.google.com", "tpu.google.com", true},
		{"dra.net", "", false},
		{"example.com/gpu", "", false},
		{"", "", false},
	} {
		if got := cloudprovider.IsGPUDriver(tc.driver, tc.providerDriver); got != tc.want {
			t.Errorf("IsGPUDriver(%q, %q) = %v, want %v", tc.driver, tc.providerDriver, got, tc.want)
		}
	}
}
