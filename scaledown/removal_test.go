package scaledown

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

type nopMetrics struct{}

func (nopMetrics) RemovingNode(context.Context, *apiv1.Node, bool, float64, []string) {}
func (nopMetrics) ScaledDown(context.Context, *apiv1.Node, string)                    {}
func (nopMetrics) UpdateDuration(string, time.Duration)                               {}
func (nopMetrics) UpdatePendingNodeDeletions(int)                                     {}
func (nopMetrics) UpdateMaxNodeSkipEval(time.Duration)                                {}
func (nopMetrics) RegisterSkippedScaleEvent(string, string)                           {}
func (nopMetrics) RegisterEvictions(int, int)                                         {}
func (nopMetrics) ObserveNodeRemoval(bool, time.Duration)                             {}
func (nopMetrics) UpdateUnneededNodesCount(int)                                       {}
func (nopMetrics) UpdateUnremovableNodesCount(map[string]int)                         {}
func (nopMetrics) UpdateScaleDownInCooldown(bool)                                     {}

// actuatorFixture: the planner fixture's nodes, an actuator on a real clock
// with short delays and poll periods.
func actuatorFixture(t *testing.T, min int, nodes map[string]string, opts func(*Options)) (*fixture, *Actuator) {
	t.Helper()
	f := newFixture(t, min, nodes, nil)
	o := DefaultOptions()
	o.NodeDeleteDelayAfterTaint = 100 * time.Millisecond
	o.NodeDeletionDelayTimeout = time.Minute
	o.MaxGracefulTerminationSec = 1
	if opts != nil {
		opts(&o)
	}
	a := NewActuator(o, f.client, NewTaints(f.client, 10, false), nil, nopMetrics{}, clock.RealClock{})
	a.annotationPoll, a.podGonePoll, a.evictionRetry = 20*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond
	return f, a
}

// candidates plans far enough in the future for every unneeded node to be
// removable.
func (f *fixture) candidates(t *testing.T) []*Candidate {
	t.Helper()
	f.plan(t, t0)
	return f.plan(t, t0.Add(11*time.Minute)).Removable
}

func (f *fixture) deleteCalls() [][]string {
	var out [][]string
	for _, c := range f.p.Calls() {
		if c.Method == "DeleteNodes" {
			nodes := append([]string(nil), c.Nodes...)
			sort.Strings(nodes)
			out = append(out, nodes)
		}
	}
	return out
}

func (f *fixture) hasToBeDeleted(t *testing.T, name string) bool {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return hasTaint(n, ToBeDeletedTaint)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitDone(t *testing.T, a *Actuator) {
	t.Helper()
	done := make(chan struct{})
	go func() { a.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("removals still running 20s later")
	}
}

// A pod bound to an empty node after it was tainted (the API server has it,
// the plan did not) cancels its deletion and removes the taint; the other
// empty node of the group goes.
func TestPodBoundAfterTaintCancelsDeletion(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": "", "b": ""}, func(o *Options) {
		o.NodeDeleteDelayAfterTaint = time.Second
	})
	cs := f.candidates(t)
	if n := a.Remove(context.Background(), cs); n != 2 {
		t.Fatalf("started %d removals, want 2", n)
	}
	waitFor(t, "a tainted", func() bool { return f.hasToBeDeleted(t, "a") })
	if deleting, _ := a.InFlight(nil); deleting["a"] != "g" || deleting["b"] != "g" {
		t.Errorf("in flight %v, want a and b of g", deleting)
	}
	late := pod("late", "a", "1")
	if _, err := f.client.CoreV1().Pods("default").Create(context.Background(), late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a)
	if got := f.deleteCalls(); len(got) != 1 || len(got[0]) != 1 || got[0][0] != "b" {
		t.Errorf("DeleteNodes calls %v, want one of b alone", got)
	}
	if f.hasToBeDeleted(t, "a") {
		t.Error("a kept its ToBeDeleted taint after its deletion was cancelled")
	}
	if deleting, deleted := a.InFlight([]*apiv1.Node{f.nodes[0], f.nodes[1]}); len(deleting) != 0 || !deleted["b"] || deleted["a"] {
		t.Errorf("after: in flight %v, deleted %v", deleting, deleted)
	}
}

// Deletion waits while a delay-deletion annotation is on the node, and goes
// on when it is removed.
func TestDelayDeletionAnnotationHoldsDeletion(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": ""}, nil)
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	n.Annotations[DelayDeletionAnnotationPrefix+"backup"] = "running"
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Remove(context.Background(), f.candidates(t))
	time.Sleep(time.Second) // the delay after taint (100ms) and some polls
	if got := f.deleteCalls(); len(got) != 0 {
		t.Fatalf("deleted %v while the annotation is there", got)
	}
	n, _ = f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	delete(n.Annotations, DelayDeletionAnnotationPrefix+"backup")
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a)
	if got := f.deleteCalls(); len(got) != 1 {
		t.Errorf("DeleteNodes calls %v, want a's", got)
	}
}

// An annotation that stays holds the deletion only for
// --node-deletion-delay-timeout.
func TestDelayDeletionTimesOut(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": ""}, func(o *Options) {
		o.NodeDeletionDelayTimeout = 300 * time.Millisecond
	})
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	n.Annotations[DelayDeletionAnnotationPrefix+"stuck"] = ""
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a.Remove(context.Background(), f.candidates(t))
	waitDone(t, a)
	if got := f.deleteCalls(); len(got) != 1 {
		t.Errorf("DeleteNodes calls %v, want a's after the timeout", got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("deleted after %v, before the timeout", d)
	}
}

// The delay after tainting is waited before the node is deleted.
func TestDeleteDelayAfterTaint(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": ""}, func(o *Options) {
		o.NodeDeleteDelayAfterTaint = 700 * time.Millisecond
	})
	start := time.Now()
	a.Remove(context.Background(), f.candidates(t))
	waitDone(t, a)
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Errorf("deleted %v after tainting, before --node-delete-delay-after-taint", d)
	}
	if got := f.deleteCalls(); len(got) != 1 {
		t.Errorf("DeleteNodes calls %v", got)
	}
}

// A drain stops when its context ends (lost lease, SIGTERM): no more
// evictions, no deletion, no failure recorded, and the taint stays for the
// next run's start-up clean-up.
func TestDrainStopsWhenTheContextEnds(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": "1", "b": ""}, func(o *Options) {
		o.MaxPodEvictionTime = time.Hour
	})
	evictions := make(chan struct{}, 1000)
	f.refuseEvictions(apierrors.NewTooManyRequests("a PDB refuses", 1), evictions)
	var move []*Candidate
	for _, c := range f.candidates(t) {
		if c.Node.Name == "a" {
			move = append(move, c)
		}
	}
	if len(move) != 1 {
		t.Fatalf("a not removable")
	}
	rec := &eventLog{}
	a.recorder = rec
	ctx, cancel := context.WithCancel(context.Background())
	a.Remove(ctx, move)
	<-evictions
	<-evictions // it retries
	cancel()
	waitDone(t, a)
	for len(evictions) > 0 {
		<-evictions
	}
	time.Sleep(100 * time.Millisecond)
	if len(evictions) != 0 {
		t.Error("evictions went on after the context ended")
	}
	if got := f.deleteCalls(); len(got) != 0 {
		t.Errorf("DeleteNodes calls %v", got)
	}
	if !f.hasToBeDeleted(t, "a") {
		t.Error("the taint was removed; it is left for the start-up clean-up")
	}
	if _, failed := a.Last(); !failed.IsZero() {
		t.Error("an interrupted drain counted as a failure")
	}
	for _, ev := range rec.all() {
		if strings.Contains(ev, "ScaleDownFailed") {
			t.Errorf("an interrupted drain recorded %q", ev)
		}
	}
	if a.Busy() != 0 {
		t.Errorf("%d removals still in flight", a.Busy())
	}
}

// A zeroOrMaxNodeScaling group's nodes go in one DeleteNodes call; when one
// of them cannot go, none does and all are untainted.
func TestAtomicGroupRemovedTogether(t *testing.T) {
	atomic := func(f *fixture) {
		o := config.Defaults().NodeGroupDefaults
		o.ZeroOrMaxNodeScaling = true
		f.g.SetOptions(&o)
	}
	t.Run("whole", func(t *testing.T) {
		f, a := actuatorFixture(t, 0, map[string]string{"a": "", "b": "", "c": "1"}, nil)
		atomic(f)
		evicted := 0
		f.client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() == "eviction" {
				evicted++
				_ = f.client.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "default", "p-c")
				return true, nil, nil
			}
			return false, nil, nil
		})
		if _, err := f.client.CoreV1().Pods("default").Create(context.Background(), f.pods[0], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The parallelism budget is below the group's size: it goes whole
		// all the same when nothing else is in flight.
		a.opts.MaxScaleDownParallelism = 2
		if n := a.Remove(context.Background(), f.candidates(t)); n != 3 {
			t.Fatalf("started %d, want 3", n)
		}
		waitDone(t, a)
		if got := f.deleteCalls(); len(got) != 1 || len(got[0]) != 3 {
			t.Errorf("DeleteNodes calls %v, want one of a, b and c", got)
		}
		if evicted != 1 {
			t.Errorf("%d evictions, want c's pod", evicted)
		}
	})
	t.Run("none", func(t *testing.T) {
		f, a := actuatorFixture(t, 0, map[string]string{"a": "", "b": ""}, func(o *Options) {
			o.NodeDeleteDelayAfterTaint = time.Second
		})
		atomic(f)
		a.Remove(context.Background(), f.candidates(t))
		waitFor(t, "b tainted", func() bool { return f.hasToBeDeleted(t, "b") })
		if _, err := f.client.CoreV1().Pods("default").Create(context.Background(), pod("late", "b", "1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitDone(t, a)
		if got := f.deleteCalls(); len(got) != 0 {
			t.Errorf("DeleteNodes calls %v, want none", got)
		}
		for _, n := range []string{"a", "b"} {
			if f.hasToBeDeleted(t, n) {
				t.Errorf("%s still tainted", n)
			}
		}
	})
}

// Removals in flight count against --max-scale-down-parallelism and
// --max-drain-parallelism across calls, and a node in flight is not started
// twice.
func TestRemoveBudgetsCountRemovalsInFlight(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": "", "b": "", "c": "", "d": "1", "e": "1"}, func(o *Options) {
		o.MaxScaleDownParallelism = 4
		o.MaxDrainParallelism = 1
		o.NodeDeleteDelayAfterTaint = time.Second
	})
	cs := f.candidates(t)
	if len(cs) != 5 {
		t.Fatalf("%d removable, want 5", len(cs))
	}
	if n := a.Remove(context.Background(), cs); n != 4 {
		t.Errorf("started %d, want 4 (three empty, one drain)", n)
	}
	if n := a.Remove(context.Background(), cs); n != 0 {
		t.Errorf("started %d more while 4 are in flight, want 0", n)
	}
	if deleting, _ := a.InFlight(nil); len(deleting) != 4 {
		t.Errorf("in flight %v, want 4", deleting)
	}
	waitDone(t, a)
}

// --max-scale-down-parallelism=0 (accepted, as upstream, with a warning)
// removes nothing, a whole zeroOrMax group included; --max-drain-parallelism=0
// removes only empty nodes.
func TestZeroParallelismRemovesNothing(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": "", "b": "1"}, func(o *Options) {
		o.MaxScaleDownParallelism = 0
	})
	o := config.Defaults().NodeGroupDefaults
	o.ZeroOrMaxNodeScaling = true
	f.g.SetOptions(&o)
	if n := a.Remove(context.Background(), f.candidates(t)); n != 0 {
		t.Errorf("started %d with --max-scale-down-parallelism=0, want 0", n)
	}
	waitDone(t, a)
	if got := f.deleteCalls(); len(got) != 0 {
		t.Errorf("DeleteNodes calls %v, want none", got)
	}

	f, a = actuatorFixture(t, 0, map[string]string{"a": "", "b": "1"}, func(o *Options) {
		o.MaxDrainParallelism = 0
	})
	if n := a.Remove(context.Background(), f.candidates(t)); n != 1 {
		t.Errorf("started %d with --max-drain-parallelism=0, want 1 (the empty node)", n)
	}
	waitDone(t, a)
	if got := f.deleteCalls(); len(got) != 1 || len(got[0]) != 1 || got[0][0] != "a" {
		t.Errorf("DeleteNodes calls %v, want one of a", got)
	}
}

// refuseEvictions makes the API server refuse every eviction with err;
// each refused eviction is sent on seen when it is not nil.
func (f *fixture) refuseEvictions(err error, seen chan<- struct{}) {
	f.client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		if seen != nil {
			seen <- struct{}{}
		}
		return true, nil, err
	})
}
