package scaledown

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// sliceSession adds the ResourceSlices nodes publish to the fake session.
type sliceSession struct {
	*session
	slices map[string][]*resourceapi.ResourceSlice
}

func (s *sliceSession) ResourceSlices(node string) []*resourceapi.ResourceSlice {
	return s.slices[node]
}

// TestPlannerKeepsTheMinimumDRAGPUs: three empty nodes publishing 2 DRA
// GPUs each (driver gpu.example.com, no extended resource, no GPU label:
// the devices count under the driver's name), --gpu-total minimum 3 for
// that driver: one may go (4 GPUs stay), the others are kept.
func TestPlannerKeepsTheMinimumDRAGPUs(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": ""}, func(o *fixtureOptions) {
		o.GPUTotal = []config.GPULimit{{Type: "gpu.example.com", Min: 3, Max: 100}}
	})
	sess := &sliceSession{session: f.sess, slices: map[string][]*resourceapi.ResourceSlice{}}
	for _, n := range f.nodes {
		name := n.Name
		sess.slices[name] = []*resourceapi.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: &name,
				Pool:    resourceapi.ResourcePool{Name: name, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}}}}
	}
	plan := func(now time.Time) *Plan {
		var nodes []*apiv1.Node
		for _, n := range f.nodes {
			cur, err := f.client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, cur)
		}
		if err := f.state.Update(context.Background(), f.p, nodes, now); err != nil {
			t.Fatal(err)
		}
		return f.planner.Update(context.Background(), Input{Now: now, Nodes: nodes, ScheduledPods: f.pods, State: f.state,
			Session: sess})
	}
	plan(t0)
	if got := plan(t0.Add(11 * time.Minute)); len(got.Removable) != 1 {
		t.Errorf("removable %v, want one (6 DRA GPUs, minimum 3)", names(got.Removable))
	}
}
