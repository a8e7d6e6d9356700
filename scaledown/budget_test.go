package scaledown

import (
	"context"
	"strconv"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// planWith plans like plan, with change applied to the input (and the
// provider) after the cluster state was read, as the steps before
// scale-down in the same loop would.
func (f *fixture) planWith(t *testing.T, now time.Time, change func(in *Input)) *Plan {
	t.Helper()
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
	in := Input{Now: now, Nodes: nodes, ScheduledPods: f.pods, State: f.state, Session: f.sess}
	if change != nil {
		change(&in)
	}
	return f.planner.Update(context.Background(), in)
}

func (f *fixture) taint(t *testing.T, name, key string) {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: key, Value: strconv.FormatInt(t0.Unix(), 10),
		Effect: apiv1.TaintEffectNoSchedule})
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The room a group has above its min size leaves out the removals in
// flight: drains and empty-node deletions the actuator runs, nodes another
// run tainted ToBeDeleted, and deletions done earlier in the same loop.
func TestMinSizeCountsDeletionsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before runs before the first plan, change after the state was read
		// in the last one.
		before func(t *testing.T, f *fixture)
		change func(t *testing.T, f *fixture, in *Input)
		want   int
	}{
		{name: "nothing in flight", want: 3},
		{name: "the actuator removes d, not tainted yet", want: 2,
			change: func(_ *testing.T, _ *fixture, in *Input) { in.deleting = map[string]string{"d": "g"} }},
		{name: "d tainted ToBeDeleted by another run", want: 2,
			before: func(t *testing.T, f *fixture) { f.taint(t, "d", ToBeDeletedTaint) }},
		{name: "d deleted earlier in this loop, still listed", want: 2,
			before: func(t *testing.T, f *fixture) { f.taint(t, "d", ToBeDeletedTaint) },
			change: func(t *testing.T, f *fixture, in *Input) {
				n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "d", metav1.GetOptions{})
				if err := f.g.DeleteNodes(context.Background(), []*apiv1.Node{n}); err != nil {
					t.Fatal(err)
				}
				in.deleted = map[string]bool{"d": true}
			}},
		{name: "d's deletion finished, the group's size knows it", want: 2,
			before: func(t *testing.T, f *fixture) {
				f.taint(t, "d", ToBeDeletedTaint)
				n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "d", metav1.GetOptions{})
				if err := f.g.DeleteNodes(context.Background(), []*apiv1.Node{n}); err != nil {
					t.Fatal(err)
				}
			},
			change: func(_ *testing.T, _ *fixture, in *Input) { in.deleted = map[string]bool{"d": true} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1, map[string]string{"a": "", "b": "", "c": "", "d": ""}, nil)
			if tc.before != nil {
				tc.before(t, f)
			}
			f.plan(t, t0)
			plan := f.planWith(t, t0.Add(11*time.Minute), func(in *Input) {
				if tc.change != nil {
					tc.change(t, f, in)
				}
			})
			if got := names(plan.Removable); len(got) != tc.want || got["d"] {
				t.Errorf("removable %v, want %d of a, b and c; unremovable %v", got, tc.want, plan.Unremovable)
			}
		})
	}
}

// A zeroOrMaxNodeScaling group loses all its nodes in one go, and only
// when every one of them is removable.
func TestZeroOrMaxGroupGoesWhole(t *testing.T) {
	zeroOrMax := func(f *fixture) {
		o := config.Defaults().NodeGroupDefaults
		o.ZeroOrMaxNodeScaling = true
		f.g.SetOptions(&o)
	}
	t.Run("all unneeded: all go, marked atomic", func(t *testing.T) {
		f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": "1"}, nil)
		zeroOrMax(f)
		f.plan(t, t0)
		plan := f.plan(t, t0.Add(11*time.Minute))
		if got := names(plan.Removable); len(got) != 3 {
			t.Fatalf("removable %v, want a, b and c; unremovable %v", got, plan.Unremovable)
		}
		for _, c := range plan.Removable {
			if !c.Atomic {
				t.Errorf("%s not marked atomic", c.Node.Name)
			}
		}
	})
	t.Run("one needed: none goes", func(t *testing.T) {
		f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": "3"}, nil)
		zeroOrMax(f)
		f.plan(t, t0)
		plan := f.plan(t, t0.Add(11*time.Minute))
		if len(plan.Removable) != 0 {
			t.Fatalf("removable %v, want none (c is busy)", names(plan.Removable))
		}
		if plan.Unremovable["a"] != ReasonAtomicScaleDownFailed {
			t.Errorf("a: reason %q, want %q", plan.Unremovable["a"], ReasonAtomicScaleDownFailed)
		}
	})
	t.Run("min size above zero: none goes", func(t *testing.T) {
		f := newFixture(t, 1, map[string]string{"a": "", "b": ""}, nil)
		zeroOrMax(f)
		f.plan(t, t0)
		plan := f.plan(t, t0.Add(11*time.Minute))
		if len(plan.Removable) != 0 || plan.Unremovable["a"] != ReasonNodeGroupMinSizeReached {
			t.Fatalf("removable %v, a's reason %q", names(plan.Removable), plan.Unremovable["a"])
		}
	})
	t.Run("one node not yet due: none goes", func(t *testing.T) {
		f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": "3"}, nil)
		zeroOrMax(f)
		f.plan(t, t0)
		f.setPodCPU("c", "1")
		f.plan(t, t0.Add(5*time.Minute))
		plan := f.plan(t, t0.Add(11*time.Minute))
		if len(plan.Removable) != 0 {
			t.Fatalf("removable %v, want none (c unneeded for 6 minutes only)", names(plan.Removable))
		}
	})
}

// A node being deleted or drained is no place to move a candidate's pods:
// the removal simulation is told to avoid it.
func TestNodesInFlightAreNoDestination(t *testing.T) {
	f := newFixture(t, 0, map[string]string{"a": "1", "b": "", "c": ""}, nil)
	f.taint(t, "b", ToBeDeletedTaint)
	f.planWith(t, t0, func(in *Input) { in.deleting = map[string]string{"c": "g"} })
	got := f.sess.avoided["a"]
	if !got["b"] || !got["c"] {
		t.Errorf("moving a's pods avoids %v, want b (tainted ToBeDeleted) and c (being removed)", got)
	}
}
