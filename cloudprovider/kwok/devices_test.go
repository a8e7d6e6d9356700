package kwok

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const gpuGroup = `
nodeGroups:
- name: gpu
  maxSize: 4
  template:
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
    devices:
    - driver: gpu.example.com
      devices:
      - name: gpu-0
        attributes: {model: {string: a100}}
        capacity: {memory: {value: 80Gi}}
      - name: gpu-1
`

func TestTemplateCarriesTheGroupsResourceSlices(t *testing.T) {
	_, g := newTestProvider(t, fake.NewClientset(), gpuGroup)
	info, err := g.TemplateNodeInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.ResourceSlices) != 1 {
		t.Fatalf("template slices: %d, want 1", len(info.ResourceSlices))
	}
	sl := info.ResourceSlices[0]
	node := info.Node.Name
	want := resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: &node,
		Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		Devices: []resourceapi.Device{
			{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("a100")}},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}}},
			{Name: "gpu-1"},
		}}
	if diff := cmp.Diff(want, sl.Spec); diff != "" {
		t.Errorf("template slice (-want +got):\n%s", diff)
	}
	if len(sl.OwnerReferences) != 0 {
		t.Errorf("a template's slice is owned by %v; it has no Node", sl.OwnerReferences)
	}
}

func TestGroupsWithoutDevicesHaveNoSlices(t *testing.T) {
	_, g := newTestProvider(t, fake.NewClientset(), oneGroup)
	info, err := g.TemplateNodeInfo(context.Background())
	if err != nil || len(info.ResourceSlices) != 0 {
		t.Errorf("template of a group without devices: %v slices, %v", len(info.ResourceSlices), err)
	}
}
