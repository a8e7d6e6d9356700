package scaleup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

func TestExpectSlicesStandsInForDriversStillStarting(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := func(name string, age time.Duration) *apiv1.Node {
		return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	}
	slice := func(node string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: &node,
				Pool:    resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "gpu-0"}}}}
	}
	young, old, published := node("young", time.Minute), node("old", time.Hour), node("published", time.Minute)
	snap := framework.NewSnapshot([]*apiv1.Node{young, old, published}, nil)
	snap.SetResourceSlices("published", []*resourceapi.ResourceSlice{slice("published")})
	gs := &groupState{nodes: []*apiv1.Node{young, old, published, node("absent", time.Minute)}, startup: 15 * time.Minute,
		template: &cloudprovider.NodeInfo{Node: node("tmpl", 0), ResourceSlices: []*resourceapi.ResourceSlice{slice("tmpl")}}}

	expectSlices(snap, gs, now)

	got := map[string]string{}
	for _, n := range []string{"young", "old", "published"} {
		for _, sl := range snap.ResourceSlices(n) {
			got[n] = sl.Spec.Pool.Name + "/" + *sl.Spec.NodeName
		}
	}
	want := map[string]string{"young": "young/young", "published": "published/published"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slices per node (-want +got):\n%s", diff)
	}
}
