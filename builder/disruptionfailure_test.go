package builder

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

var failT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type healthFixture struct {
	t        *testing.T
	provider *cpfake.Provider
	state    *clusterstate.Registry
	nodes    []*apiv1.Node
	group    cloudprovider.NodeGroup
}

func newHealthFixture(t *testing.T) *healthFixture {
	p := cpfake.NewProvider()
	p.AddNodeGroup("cheap", 0, 10, 2, nil)
	f := &healthFixture{t: t, provider: p, state: clusterstate.NewRegistry(clusterstate.DefaultOptions())}
	for _, name := range []string{"c1", "c2"} {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(failT0.Add(-time.Hour))},
			Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(failT0.Add(-time.Hour))}}}}
		p.AddNode("cheap", n)
		f.nodes = append(f.nodes, n)
	}
	groups, err := p.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.group = groups[0]
	return f
}

func (f *healthFixture) update(at time.Duration) {
	f.t.Helper()
	if err := f.state.Update(context.Background(), f.provider, f.nodes, failT0.Add(at)); err != nil {
		f.t.Fatal(err)
	}
}

// failNew makes the group's instances still being created fail (a stockout).
func (f *healthFixture) failNew() {
	f.t.Helper()
	instances, err := f.group.Nodes(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, in := range instances {
		if in.Status != nil && in.Status.State == cloudprovider.InstanceCreating {
			f.provider.SetInstanceStatus("cheap", in.Id, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
				ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT",
					ErrorMessage: "no capacity"}})
		}
	}
}

// TestReplacementHealthFailureAfterTheAsk: an instance asked for that fails
// backs the group off; FailedSince the ask says so, and goes on saying so
// once the failed instance was deleted (the clean-up); BackedOff too.
func TestReplacementHealthFailureAfterTheAsk(t *testing.T) {
	f := newHealthFixture(t)
	h := NewReplacementHealth(f.state)
	f.update(0)
	if off, why := h.BackedOff("cheap", failT0); off {
		t.Fatalf("a healthy group backed off: %s", why)
	}
	if err := f.group.IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	f.update(10 * time.Second)
	if failed, why := h.FailedSince("cheap", failT0, failT0.Add(10*time.Second)); failed {
		t.Fatalf("an instance still being created counted as failed: %s", why)
	}
	f.failNew()
	f.update(20 * time.Second)
	failed, why := h.FailedSince("cheap", failT0, failT0.Add(20*time.Second))
	if !failed || !strings.Contains(why, "STOCKOUT") {
		t.Errorf("FailedSince = %v, %q; want the stockout", failed, why)
	}
	// The clean-up deletes the failed instance: the back-off stays.
	instances, _ := f.group.Nodes(context.Background())
	for _, in := range instances {
		if in.Status != nil && in.Status.ErrorInfo != nil {
			if err := f.group.DecreaseTargetSize(context.Background(), -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.update(30 * time.Second)
	if failed, why := h.FailedSince("cheap", failT0, failT0.Add(30*time.Second)); !failed {
		t.Errorf("the failure forgotten once the failed instance went: %q", why)
	}
	if off, why := h.BackedOff("cheap", failT0.Add(30*time.Second)); !off || !strings.Contains(why, "STOCKOUT") {
		t.Errorf("BackedOff = %v, %q; want backed off for the stockout", off, why)
	}
	if failed, _ := h.FailedSince("other", failT0, failT0.Add(30*time.Second)); failed {
		t.Error("a group the registry does not know failed")
	}
}

// TestReplacementHealthFailureBeforeTheAsk: a back-off (and a failed
// instance left behind) already there when the group was asked is not a
// failure since the ask; a new back-off after it ended is.
func TestReplacementHealthFailureBeforeTheAsk(t *testing.T) {
	f := newHealthFixture(t)
	h := NewReplacementHealth(f.state)
	if err := f.group.IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	f.failNew()
	f.update(0)
	if off, _ := h.BackedOff("cheap", failT0); !off {
		t.Fatal("want the group backed off")
	}
	f.update(time.Minute)
	if failed, why := h.FailedSince("cheap", failT0.Add(30*time.Second), failT0.Add(time.Minute)); failed {
		t.Errorf("a back-off seen before the ask counted as a failure since: %s", why)
	}
	// The back-off ends (5 minutes by default), the failed instance stays
	// listed: nothing new.
	f.update(6 * time.Minute)
	ask := failT0.Add(6 * time.Minute)
	if off, why := h.BackedOff("cheap", ask); off {
		t.Fatalf("still backed off: %s", why)
	}
	if failed, why := h.FailedSince("cheap", ask, ask.Add(10*time.Second)); failed {
		t.Errorf("a failed instance seen before the ask counted as a failure since: %s", why)
	}
	// A new instance fails after the ask.
	if err := f.group.IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	f.failNew()
	f.update(6*time.Minute + 20*time.Second)
	if failed, why := h.FailedSince("cheap", ask, ask.Add(20*time.Second)); !failed || !strings.Contains(why, "STOCKOUT") {
		t.Errorf("FailedSince = %v, %q; want the new failure", failed, why)
	}
}

// TestReplacementHealthTargetDrop: the group's target falls below what it
// was when the replacement was asked (another node of it deleted, a
// pending instance cancelled): no failure.
func TestReplacementHealthTargetDrop(t *testing.T) {
	f := newHealthFixture(t)
	h := NewReplacementHealth(f.state)
	f.update(0)
	h.BackedOff("cheap", failT0)
	if err := f.group.IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	f.update(10 * time.Second)
	if err := f.group.DeleteNodes(context.Background(), f.nodes[:1]); err != nil {
		t.Fatal(err)
	}
	f.nodes = f.nodes[1:]
	if err := f.group.DecreaseTargetSize(context.Background(), -1); err != nil {
		t.Fatal(err)
	}
	f.update(20 * time.Second)
	if got, _ := f.group.TargetSize(context.Background()); got != 1 {
		t.Fatalf("target %d, want 1 (below the 2 before the ask)", got)
	}
	if failed, why := h.FailedSince("cheap", failT0, failT0.Add(20*time.Second)); failed {
		t.Errorf("a target that fell counted as a failure: %s", why)
	}
	if off, why := h.BackedOff("cheap", failT0.Add(20*time.Second)); off {
		t.Errorf("a target that fell backed the group off: %s", why)
	}
}

// driftOnce proposes node old for drift, replaced by one node of cheap.
type driftOnce struct{}

func (driftOnce) Reason() disruption.Reason { return disruption.Drifted }

func (driftOnce) Propose(context.Context, *processors.Loop) []disruption.Candidate {
	return []disruption.Candidate{{Nodes: []string{"old"}, Replacement: []disruption.Replacement{{Group: "cheap", Count: 1}}}}
}

// TestEngineWithReplacementHealth: the engine on the registry's answers, as
// in TestDisruptionReplacementOutOfCapacity: the replacement's instance
// fails (stockout) and is deleted by the clean-up within a loop; the plan
// ends in the next loop, the node given back, and the retry after the
// cooldown does not ask the group while it is backed off.
func TestEngineWithReplacementHealth(t *testing.T) {
	ctx := context.Background()
	f := newHealthFixture(t)
	old := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: metav1.NewTime(failT0.Add(-time.Hour))},
		Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}}
	f.provider.AddNodeGroup("g", 0, 10, 1, nil)
	f.provider.AddNode("g", old)
	f.nodes = append(f.nodes, old)
	client := fake.NewSimpleClientset()
	for _, n := range f.nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	events := record.NewFakeRecorder(100)
	engine := disruption.New(disruption.Options{MaxConcurrent: 1, Cooldown: 10 * time.Second, MaxUnhealthyPercent: 40,
		MaxPodEvictionTime: time.Minute, MaxNodeProvisionTime: 15 * time.Minute, Namespace: "kube-system",
		Sources: []disruption.Source{driftOnce{}}, ReplacementHealth: NewReplacementHealth(f.state)},
		client, f.provider, events, nil)
	loop := func(at time.Duration) {
		f.update(at)
		engine.Repair(ctx, &processors.Loop{Now: failT0.Add(at), Nodes: f.nodes})
	}
	increases := func() int {
		n := 0
		for _, c := range f.provider.Calls() {
			if c.Method == "IncreaseSize" && c.Group == "cheap" {
				n++
			}
		}
		return n
	}
	loop(0)
	if increases() != 1 || len(engine.InFlight()) != 1 {
		t.Fatalf("increases %d, in flight %v: want the replacement asked for", increases(), engine.InFlight())
	}
	f.failNew()
	loop(10 * time.Second) // the registry sees the stockout and backs cheap off
	if n, err := client.CoreV1().Nodes().Get(ctx, "old", metav1.GetOptions{}); err != nil || n.Spec.Unschedulable ||
		len(engine.InFlight()) != 0 {
		t.Fatalf("in flight %v, node %+v (%v): want the plan ended and the node given back 10s in", engine.InFlight(), n.Spec, err)
	}
	var ev []string
	for len(events.Events) > 0 {
		ev = append(ev, <-events.Events)
	}
	if all := strings.Join(ev, "\n"); !strings.Contains(all, "DisruptionFailed") || !strings.Contains(all, "ReplacementFailed") {
		t.Errorf("events:\n%s", all)
	}
	// The clean-up deletes the failed instance; the cooldown passes.
	if err := f.group.DecreaseTargetSize(ctx, -1); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute} {
		loop(at)
		if increases() != 1 || len(engine.InFlight()) != 0 {
			t.Fatalf("at %v: increases %d, in flight %v: a backed-off group was asked", at, increases(), engine.InFlight())
		}
	}
	loop(6 * time.Minute) // the back-off (5 minutes) is over
	if increases() != 2 {
		t.Errorf("increases %d after the back-off, want the retry asking again", increases())
	}
}
