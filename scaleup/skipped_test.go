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
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// durationCounter counts the durations reported per function.
type durationCounter struct {
	nopReporter
	n map[string]int
}

func (r *durationCounter) UpdateDuration(function string, _ time.Duration) { r.n[function]++ }

// TestSkippedNodeGroupsSimulation: with
// --scaleup-simulation-for-skipped-node-groups-enabled, as upstream since
// 851df332c3 (and 6efe18636 for the duration), the pods a scale-up leaves
// are checked against the templates of the backed-off groups: a group
// whose template refuses them is reported with the scheduler's reason, not
// as backed off; one that would take them stays backed off; the check is
// timed once per scale-up as function="scaleUp:skippedNodeGroupsSimulation".
// Without the flag, both are reported as backed off and nothing is timed.
func TestSkippedNodeGroupsSimulation(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		simulate  bool
		want      string
		wantSmall explain.NodeGroupVerdict
		timed     int
	}{
		{name: "off", want: "2 in backoff after failed scale-up (STOCKOUT)",
			wantSmall: explain.NodeGroupVerdict{NodeGroup: "small", Cause: explain.CauseBackoff,
				Reason: "in backoff after failed scale-up (STOCKOUT)", Detail: "no capacity"}},
		{name: "on", simulate: true, want: "1 Insufficient cpu, 1 in backoff after failed scale-up (STOCKOUT)",
			wantSmall: explain.NodeGroupVerdict{NodeGroup: "small", Cause: explain.CauseScheduler,
				Plugin: "NodeResourcesFit", Reason: "Insufficient cpu",
				Detail: "skipped in this loop (in backoff after failed scale-up (STOCKOUT)); its template refuses these pods too"},
			timed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := fakeprovider.NewProvider()
			p.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
			p.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
			o := newOrchestrator(t, p, func(o *Options) { o.ScaleUpSimulationForSkippedNodeGroups = tc.simulate })
			r := &durationCounter{n: map[string]int{}}
			o.report = r
			rec := explain.NewRecorder()
			WithExplainer(rec)(o)
			if err := o.state.Update(ctx, p, nil, now); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"small", "large"} {
				o.state.RegisterFailedScaleUp(ctx, id, clusterstate.BackoffReason{ErrorCode: "STOCKOUT", ErrorMessage: "no capacity"}, now)
			}
			pod := onePod("big", "8")
			rec.BeginLoop(now)
			res, err := runLoop(ctx, o, Input{Now: now, Pending: []*apiv1.Pod{pod}})
			if err != nil {
				t.Fatal(err)
			}
			rec.EndLoop()
			if len(res.Increases) != 0 {
				t.Fatalf("increases %v, want none: the simulation only reports", increases(res))
			}
			if diff := cmp.Diff(map[string]string{pod.Name: tc.want}, byName(res.Remaining)); diff != "" {
				t.Errorf("remaining (-want +got):\n%s", diff)
			}
			g, _, ok := rec.Pod("default/big")
			if !ok {
				t.Fatal("default/big not recorded")
			}
			verdicts := map[string]explain.NodeGroupVerdict{}
			for _, v := range g.NodeGroups {
				verdicts[v.NodeGroup] = v
			}
			if diff := cmp.Diff(tc.wantSmall, verdicts["small"], cmpopts.IgnoreFields(explain.NodeGroupVerdict{}, "Until")); diff != "" {
				t.Errorf("small's verdict (-want +got):\n%s", diff)
			}
			if c := verdicts["large"].Cause; c != explain.CauseBackoff {
				t.Errorf("large's verdict cause %q, want %q: its template takes the pod, it stays backed off", c, explain.CauseBackoff)
			}
			if n := r.n[metrics.FunctionSkippedNodeGroups]; n != tc.timed {
				t.Errorf("%s observed %d times, want %d", metrics.FunctionSkippedNodeGroups, n, tc.timed)
			}
		})
	}
}

// TestSkippedNodeGroupsSimulationTimedWhenNothingIsLeft: the duration is
// observed for a scale-up that serves every pod too (as upstream's, which
// times the step whenever the flag is on), and the decision is unchanged.
func TestSkippedNodeGroupsSimulationTimedWhenNothingIsLeft(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 10, 0, templateNode("g", "4"))
	o := newOrchestrator(t, p, func(o *Options) { o.ScaleUpSimulationForSkippedNodeGroups = true })
	r := &durationCounter{n: map[string]int{}}
	o.report = r
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(3, "3")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"g": 3}, increases(res)); diff != "" {
		t.Errorf("increases (-want +got):\n%s", diff)
	}
	if n := r.n[metrics.FunctionSkippedNodeGroups]; n != 1 {
		t.Errorf("%s observed %d times, want 1", metrics.FunctionSkippedNodeGroups, n)
	}
}
