package scaledown

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// --scale-down-delay-type-local: a scale-up of group g holds only g's
// nodes for --scale-down-delay-after-add; without it every group waits.
func TestScaleDownDelayTypeLocal(t *testing.T) {
	for _, local := range []bool{true, false} {
		f, a := actuatorFixture(t, 0, map[string]string{"a": ""}, func(o *Options) { o.ScaleDownDelayTypeLocal = local })
		f.p.AddNodeGroup("h", 0, 10, 1, nil)
		b := node("b")
		f.p.AddNode("h", b)
		f.nodes = append(f.nodes, b)
		if _, err := f.client.CoreV1().Nodes().Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sd := New(a.opts, f.planner, a, nopMetrics{})
		run := func(now time.Time) int {
			if err := f.state.Update(context.Background(), f.p, f.nodes, now); err != nil {
				t.Fatal(err)
			}
			return sd.Run(context.Background(), Input{Now: now, Nodes: f.nodes, ScheduledPods: f.pods, State: f.state, Session: f.sess})
		}
		run(t0)
		// Group g was scaled up 5 minutes later.
		f.state.RegisterScaleUp("g", 1, t0.Add(5*time.Minute))
		sd.ScaledUp(t0.Add(5 * time.Minute))
		started := run(t0.Add(11 * time.Minute))
		waitDone(t, a)
		got := f.deleteCalls()
		if local && (started != 1 || len(got) != 1 || got[0][0] != "b") {
			t.Errorf("local: started %d, DeleteNodes %v; want b of the other group alone", started, got)
		}
		if !local && (started != 0 || len(got) != 0) {
			t.Errorf("global: started %d, DeleteNodes %v; want nothing within the delay after add", started, got)
		}
	}
}

// --node-deletion-batcher-interval: deletions of one group that come within
// the interval go in one DeleteNodes call; without it, each goes alone.
func TestNodeDeletionBatcher(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Second} {
		f, a := actuatorFixture(t, 0, map[string]string{"a": "", "b": ""}, func(o *Options) {
			o.NodeDeletionBatcherInterval = interval
		})
		cs := f.candidates(t)
		if len(cs) != 2 {
			t.Fatalf("%d candidates, want 2", len(cs))
		}
		a.Remove(context.Background(), cs[:1])
		time.Sleep(300 * time.Millisecond) // past the first one's delay after taint
		a.Remove(context.Background(), cs[1:])
		waitDone(t, a)
		got := f.deleteCalls()
		if interval > 0 && (len(got) != 1 || len(got[0]) != 2) {
			t.Errorf("interval %v: DeleteNodes calls %v, want one with a and b", interval, got)
		}
		if interval == 0 && len(got) != 2 {
			t.Errorf("no interval: DeleteNodes calls %v, want two", got)
		}
	}
}

// WithoutRemovals (the explain command) plans and finds the node
// removable, and starts no removal: no taint, no DeleteNodes.
func TestWithoutRemovalsStartsNone(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": ""}, nil)
	sd := New(a.opts, f.planner, a, nopMetrics{}, WithoutRemovals())
	run := func(now time.Time) int {
		if err := f.state.Update(context.Background(), f.p, f.nodes, now); err != nil {
			t.Fatal(err)
		}
		return sd.Run(context.Background(), Input{Now: now, Nodes: f.nodes, ScheduledPods: f.pods, State: f.state, Session: f.sess})
	}
	run(t0)
	started := run(t0.Add(11 * time.Minute))
	waitDone(t, a)
	if len(sd.last.Removable) != 1 || started != 0 || len(f.deleteCalls()) != 0 || f.hasToBeDeleted(t, "a") {
		t.Errorf("removable %d, started %d, DeleteNodes %v, ToBeDeleted %v; want a removable and nothing done",
			len(sd.last.Removable), started, f.deleteCalls(), f.hasToBeDeleted(t, "a"))
	}
}
