package metrics

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// TestGPUWithDevices: dra_drivers names the drivers of the node's
// node-local slices, sorted, unknown ones folded into custom.driver, with
// the provider's DRA GPU driver kept; a node without slices keeps its labels.
func TestGPUWithDevices(t *testing.T) {
	slice := func(driver string, local bool) *resourceapi.ResourceSlice {
		sl := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver}}
		if local {
			sl.Spec.NodeName = ptr.To("n")
		}
		return sl
	}
	for _, tc := range []struct {
		name   string
		gpu    GPU
		slices []*resourceapi.ResourceSlice
		want   string
	}{
		{name: "no slices", want: ""},
		{name: "a NIC on a node without GPU", slices: []*resourceapi.ResourceSlice{slice("dra.net", true)}, want: "dra.net"},
		{name: "sorted, unknown folded, once each",
			slices: []*resourceapi.ResourceSlice{slice("gpu.nvidia.com", true), slice("gpu.example.com", true),
				slice("dra.net", true), slice("gpu.example.com", true), slice("other.example.com", true)},
			want: "custom.driver,dra.net,gpu.nvidia.com"},
		{name: "the provider's driver kept", gpu: GPU{DRADrivers: "gpu.nvidia.com"},
			slices: []*resourceapi.ResourceSlice{slice("dra.net", true)}, want: "dra.net,gpu.nvidia.com"},
		{name: "a slice not local to the node is not the node's", slices: []*resourceapi.ResourceSlice{slice("dra.net", false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.gpu.WithDevices(tc.slices).DRADrivers; got != tc.want {
				t.Errorf("dra_drivers = %q, want %q", got, tc.want)
			}
		})
	}
}
