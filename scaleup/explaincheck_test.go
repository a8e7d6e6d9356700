package scaleup

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
)

// TestExplainerRecordsCapacityChecks: a request's pods checked against
// the current nodes (FitAll, as check-capacity does) are recorded: where
// they are booked when they fit, and, when they do not, each node group's
// refusal with the plugin, the nodes and the cpu numbers.
func TestExplainerRecordsCapacityChecks(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		cpu     string
		count   int
		fits    bool
		outcome string
		want    []explain.NodeGroupVerdict
	}{
		{name: "fits", cpu: "3", count: 2, fits: true, outcome: explain.OutcomeBooked, want: []explain.NodeGroupVerdict{
			{NodeGroup: "booked", Fits: true, Nodes: 2, Pods: 2, Chosen: true, Why: "booked on booked-0 (1), booked-1 (1)"}}},
		{name: "too big", cpu: "5", count: 1, outcome: explain.OutcomeNoFit, want: []explain.NodeGroupVerdict{
			{NodeGroup: "booked", Cause: explain.CauseScheduler, Plugin: "NodeResourcesFit", Reason: "Insufficient cpu",
				Detail: "2 node(s): booked-0, booked-1; the pod requests 5 cpu, the most free on these nodes is 4"}}},
		{name: "one too many", cpu: "3", count: 3, outcome: explain.OutcomeNoFit, want: []explain.NodeGroupVerdict{
			{NodeGroup: "booked", Cause: explain.CauseScheduler, Plugin: "NodeResourcesFit", Reason: "Insufficient cpu",
				Detail: "2 node(s): booked-0, booked-1; the pod requests 3 cpu, the most free on these nodes is 1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider, nodes := bookingCluster(2, "4")
			o := newOrchestrator(t, provider, nil)
			rec := explain.NewRecorder()
			WithExplainer(rec)(o)
			if err := o.state.Update(ctx, provider, nodes, now); err != nil {
				t.Fatal(err)
			}
			rec.BeginLoop(now)
			s := o.Begin(ctx, Input{Now: now, Nodes: nodes})
			if got, _ := s.FitAll(ctx, [][]*apiv1.Pod{requestPods(tc.count, tc.cpu, "1Gi")}, true); got != tc.fits {
				t.Fatalf("FitAll = %v, want %v", got, tc.fits)
			}
			rec.EndLoop()
			gs, _ := rec.Request("default/big")
			if len(gs) != 1 {
				t.Fatalf("%d records of the request, want 1: %+v", len(gs), gs)
			}
			if gs[0].Outcome != tc.outcome {
				t.Errorf("outcome %q, want %q (%s)", gs[0].Outcome, tc.outcome, gs[0].Message)
			}
			if diff := cmp.Diff(tc.want, gs[0].NodeGroups); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExplainerRecordsBookings: a booking (Place) is recorded each time
// it is placed: the nodes that hold it and, for what no longer fits the
// registered nodes, their refusal.
func TestExplainerRecordsBookings(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	provider, nodes := bookingCluster(2, "4")
	o := newOrchestrator(t, provider, nil)
	rec := explain.NewRecorder()
	WithExplainer(rec)(o)
	if err := o.state.Update(ctx, provider, nodes, now); err != nil {
		t.Fatal(err)
	}
	rec.BeginLoop(now)
	s := o.Begin(ctx, Input{Now: now, Nodes: nodes})
	if rest := s.Place(ctx, [][]*apiv1.Pod{requestPods(3, "3", "1Gi")}, true); len(rest) != 1 {
		t.Fatalf("%d pods left, want 1", len(rest))
	}
	rec.EndLoop()
	gs, _ := rec.Request("default/big")
	if len(gs) != 1 {
		t.Fatalf("%d records of the request, want 1: %+v", len(gs), gs)
	}
	want := []explain.NodeGroupVerdict{
		{NodeGroup: "booked", Fits: true, Nodes: 2, Pods: 2, Chosen: true, Why: "booked on booked-0 (1), booked-1 (1)"},
		{NodeGroup: "booked", Cause: explain.CauseScheduler, Plugin: "NodeResourcesFit", Reason: "Insufficient cpu",
			Detail: "2 node(s): booked-0, booked-1; the pod requests 3 cpu, the most free on these nodes is 1"}}
	if diff := cmp.Diff(want, gs[0].NodeGroups); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	if wantMsg := "1 of the 3 pods fit no current node (pod default/big-0-2 and its like); the others are booked"; gs[0].Message != wantMsg {
		t.Errorf("message %q, want %q", gs[0].Message, wantMsg)
	}
}

// TestExplainerRecordsExpendablePods: a pending pod below
// --expendable-pods-priority-cutoff is recorded with its priority and the
// cutoff, not left unexplained.
func TestExplainerRecordsExpendablePods(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	o := newOrchestrator(t, p, nil)
	rec := explain.NewRecorder()
	WithExplainer(rec)(o)
	low := onePod("low", "1")
	prio := int32(-20)
	low.Spec.Priority = &prio
	rec.BeginLoop(now)
	if _, err := runLoop(ctx, o, Input{Now: now, Pending: []*apiv1.Pod{low}}); err != nil {
		t.Fatal(err)
	}
	rec.EndLoop()
	g, _, ok := rec.Pod("default/low")
	want := "priority -20 below the cutoff -10 (--expendable-pods-priority-cutoff); such pods never trigger a scale-up"
	if !ok || g.Outcome != explain.OutcomeExpendable || g.Message != want {
		t.Errorf("record %+v (found %v), want outcome %q with %q", g, ok, explain.OutcomeExpendable, want)
	}
}
