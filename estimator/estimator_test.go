package estimator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

func newSim(t testing.TB) *framework.Handle {
	t.Helper()
	return newSimWith(t, nil)
}

// newSimWith builds the simulator over informers holding objs (PVCs,
// StorageClasses, controllers, ...), started after the framework as cluster-autoscaler/scaleup.go
// does.
func newSimWith(t testing.TB, objs []runtime.Object, opts ...framework.Option) *framework.Handle {
	t.Helper()
	ctx := context.Background()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	h, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory, opts...)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return h
}

func TestGroupPods(t *testing.T) {
	a := pods("a", 3, "1")
	b := pods("b", 2, "1")
	bigger := pods("a", 1, "2") // same owner, different request
	single := pods("x", 2, "1")
	single[0].OwnerReferences, single[1].OwnerReferences = nil, nil
	anti := pods("c", 2, "1", antiAffinity)
	groups := GroupPods(append(append(append(append(a, b...), bigger...), single...), anti...))
	var sizes []int
	var interacting []bool
	for _, g := range groups {
		sizes = append(sizes, len(g.Pods))
		interacting = append(interacting, g.Interacting)
	}
	want := []int{3, 2, 1, 1, 1, 2}
	if len(sizes) != len(want) {
		t.Fatalf("group sizes %v, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("group sizes %v, want %v", sizes, want)
		}
	}
	if interacting[5] != true || interacting[0] != false {
		t.Errorf("interacting = %v", interacting)
	}
}

func TestEstimate(t *testing.T) {
	ds := pods("ds", 1, "500m")[0]
	for _, tc := range []struct {
		name          string
		pods          []*apiv1.Pod
		template      string
		dsPods        []*apiv1.Pod
		limits        Limits
		nodes         int
		scheduled     int
		unschedulable int
		limitedBy     Limit
		reason        string
	}{
		{name: "whole nodes and a partial one", pods: pods("a", 10, "1"), template: "4", nodes: 3, scheduled: 10},
		{name: "daemonset overhead", pods: pods("a", 10, "1"), template: "4", dsPods: []*apiv1.Pod{ds}, nodes: 4, scheduled: 10},
		{name: "second group uses the room left",
			pods: append(pods("big", 6, "1500m"), pods("small", 4, "500m")...), template: "4", nodes: 3, scheduled: 10},
		{name: "max nodes", pods: pods("a", 10, "1"), template: "4", limits: Limits{MaxNodes: 2},
			nodes: 2, scheduled: 8, limitedBy: LimitMaxNodes},
		{name: "cpu limit", pods: pods("a", 10, "1"), template: "4", limits: Limits{MaxNodes: 100, MaxMilliCPU: 6000},
			nodes: 1, scheduled: 4, limitedBy: LimitCPU},
		{name: "too big for the template", pods: pods("a", 2, "8"), template: "4", unschedulable: 2, reason: "Insufficient cpu"},
		{name: "selector the template lacks", pods: pods("a", 2, "1", selector("pool", "b")), template: "4",
			unschedulable: 2, reason: "node affinity/selector"},
		{name: "anti-affinity needs a node each", pods: pods("a", 3, "100m", antiAffinity), template: "4", nodes: 3, scheduled: 3},
		{name: "anti-affinity and max nodes", pods: pods("a", 3, "100m", antiAffinity), template: "4",
			limits: Limits{MaxNodes: 2}, nodes: 2, scheduled: 2, limitedBy: LimitMaxNodes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t)
			if tc.limits.MaxNodes == 0 {
				tc.limits.MaxNodes = 1000
			}
			est, err := New(sim).Estimate(context.Background(), GroupPods(tc.pods), templateInfo(tc.template, tc.dsPods...), "ng", tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			if est.NodeCount != tc.nodes || len(est.Scheduled) != tc.scheduled || len(est.Unschedulable) != tc.unschedulable ||
				est.LimitedBy != tc.limitedBy {
				t.Errorf("nodes %d scheduled %d unschedulable %d limitedBy %q; want %d %d %d %q",
					est.NodeCount, len(est.Scheduled), len(est.Unschedulable), est.LimitedBy,
					tc.nodes, tc.scheduled, tc.unschedulable, tc.limitedBy)
			}
			for _, reason := range est.Unschedulable {
				if !strings.Contains(reason.Error(), tc.reason) {
					t.Errorf("reason %v, want one mentioning %q", reason, tc.reason)
				}
			}
			if sim.Snapshot().Len() != 0 || sim.Snapshot().Forked() {
				t.Errorf("the estimate left %d nodes in the snapshot (forked %v)", sim.Snapshot().Len(), sim.Snapshot().Forked())
			}
		})
	}
}

// steppingClock advances by step on every reading.
type steppingClock struct {
	*clocktesting.FakePassiveClock
	step time.Duration
}

func (c steppingClock) Now() time.Time {
	c.SetTime(c.FakePassiveClock.Now().Add(c.step))
	return c.FakePassiveClock.Now()
}

func TestEstimateStopsAtItsBudget(t *testing.T) {
	clk := steppingClock{clocktesting.NewFakePassiveClock(time.Now()), time.Second}
	est, err := New(newSim(t), WithClock(clk)).Estimate(context.Background(),
		GroupPods(pods("a", 50, "100m", antiAffinity)), templateInfo("4"), "ng", Limits{MaxNodes: 1000, Budget: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if est.LimitedBy != LimitTime || est.NodeCount == 0 || est.NodeCount >= 50 {
		t.Errorf("limitedBy %q after %d nodes; want time, and some but not all nodes", est.LimitedBy, est.NodeCount)
	}
}

func TestEstimateOfWholeGroupsStopsAtItsBudget(t *testing.T) {
	var ps []*apiv1.Pod
	for g := range 20 {
		ps = append(ps, pods(fmt.Sprintf("g%d", g), 10, "1")...)
	}
	clk := steppingClock{clocktesting.NewFakePassiveClock(time.Now()), time.Second}
	est, err := New(newSim(t), WithClock(clk)).Estimate(context.Background(), GroupPods(ps), templateInfo("4"), "ng",
		Limits{MaxNodes: 1000, Budget: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Without a budget the 200 one-cpu pods need 50 nodes.
	if est.LimitedBy != LimitTime || est.NodeCount == 0 || est.NodeCount >= 50 {
		t.Errorf("limitedBy %q after %d nodes; want time, and some but not all nodes", est.LimitedBy, est.NodeCount)
	}
}
