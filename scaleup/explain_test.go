package scaleup

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiv1 "k8s.io/api/core/v1"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
)

// TestExplainerVerdicts: each pending pod group is recorded with each node
// group's verdict: the chosen fit and the other fit, and every refusal
// with its cause, plugin and numbers.
func TestExplainerVerdicts(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tainted := templateNode("tainted", "4")
	tainted.Spec.Taints = []apiv1.Taint{{Key: "dedicated", Value: "batch", Effect: apiv1.TaintEffectNoSchedule}}
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	p.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	p.AddNodeGroup("full", 0, 0, 0, templateNode("full", "4"))
	p.AddNodeGroup("tainted", 0, 10, 0, tainted)
	p.AddNodeGroup("backed", 0, 10, 0, templateNode("backed", "4"))
	o := newOrchestrator(t, p, nil)
	rec := explain.NewRecorder()
	WithExplainer(rec)(o)
	if err := o.state.Update(ctx, p, nil, now); err != nil {
		t.Fatal(err)
	}
	o.state.RegisterFailedScaleUp(ctx, "backed", clusterstate.BackoffReason{ErrorCode: "STOCKOUT", ErrorMessage: "no capacity"}, now)
	selector := onePod("selector", "1")
	selector.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	rec.BeginLoop(now)
	if _, err := runLoop(ctx, o, Input{Now: now, Pending: []*apiv1.Pod{onePod("web", "1"), selector}}); err != nil {
		t.Fatal(err)
	}
	rec.EndLoop()

	until := now.Add(5 * time.Minute) // the default initial back-off
	backoff := explain.NodeGroupVerdict{NodeGroup: "backed", Cause: explain.CauseBackoff,
		Reason: "in backoff after failed scale-up (STOCKOUT)", Detail: "no capacity", Until: &until}
	full := explain.NodeGroupVerdict{NodeGroup: "full", Cause: explain.CauseMaxSize, Reason: "max node group size reached",
		Detail: "target size 0, max size 0"}
	taint := explain.NodeGroupVerdict{NodeGroup: "tainted", Cause: explain.CauseScheduler, Plugin: "TaintToleration",
		Reason: "node(s) had untolerated taint(s) (dedicated=batch:NoSchedule)"}
	affinity := func(id string) explain.NodeGroupVerdict {
		return explain.NodeGroupVerdict{NodeGroup: id, Cause: explain.CauseScheduler, Plugin: "NodeAffinity",
			Reason: "node(s) didn't match Pod's node affinity/selector"}
	}
	for _, tc := range []struct {
		pod     string
		outcome string
		want    []explain.NodeGroupVerdict
	}{
		{pod: "default/web", outcome: explain.OutcomeScaledUp, want: []explain.NodeGroupVerdict{
			{NodeGroup: "small", Fits: true, Nodes: 1, Pods: 1, Chosen: true, Why: "chosen by --expander=least-waste among 2 option(s)"},
			{NodeGroup: "large", Fits: true, Nodes: 1, Pods: 1}, backoff, full, taint}},
		{pod: "default/selector", outcome: explain.OutcomeNoScaleUp, want: []explain.NodeGroupVerdict{
			backoff, full, affinity("large"), affinity("small"), taint}},
	} {
		g, _, ok := rec.Pod(tc.pod)
		if !ok {
			t.Fatalf("%s not recorded", tc.pod)
		}
		if g.Outcome != tc.outcome {
			t.Errorf("%s: outcome %q, want %q (%s)", tc.pod, g.Outcome, tc.outcome, g.Message)
		}
		if diff := cmp.Diff(tc.want, g.NodeGroups, cmpopts.EquateApproxTime(time.Second)); diff != "" {
			t.Errorf("%s: verdicts (-want +got):\n%s", tc.pod, diff)
		}
	}
}

// TestExplainerCarriesTheDecision: in the loop after a scale-up, the pod
// that fits the upcoming node is told which group's node it waits for and
// keeps the decision's verdicts.
func TestExplainerCarriesTheDecision(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	o := newOrchestrator(t, p, nil)
	rec := explain.NewRecorder()
	WithExplainer(rec)(o)
	pod := onePod("web", "1")
	for i := range 2 {
		rec.BeginLoop(now.Add(time.Duration(i) * time.Second))
		if _, err := runLoop(ctx, o, Input{Now: now.Add(time.Duration(i) * time.Second), Pending: []*apiv1.Pod{pod}}); err != nil {
			t.Fatal(err)
		}
		rec.EndLoop()
	}
	g, _, ok := rec.Pod("default/web")
	if !ok || g.Outcome != explain.OutcomeFitsExisting || g.WaitsFor != "small" || len(g.NodeGroups) != 1 ||
		!g.NodeGroups[0].Chosen || g.DecidedAt == nil || !g.DecidedAt.Equal(now) {
		t.Errorf("record %+v (found %v), want it waits for small with the decision of the first loop", g, ok)
	}
}
