package scaleup

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// recordingReporter notes the calls it gets.
type recordingReporter struct {
	nopReporter
	calls     []string
	functions map[string]bool
}

func (r *recordingReporter) ScaleUpStarting(_ context.Context, g cloudprovider.NodeGroup, from, to int) {
	r.calls = append(r.calls, fmt.Sprintf("starting %s %d->%d", g.Id(), from, to))
}

func (r *recordingReporter) ScaledUp(_ context.Context, g cloudprovider.NodeGroup, _ *cloudprovider.NodeInfo, from, to int) {
	r.calls = append(r.calls, fmt.Sprintf("scaled %s %d->%d", g.Id(), from, to))
}

func (r *recordingReporter) SkippedScaleUp(reason string) {
	r.calls = append(r.calls, "skipped "+reason)
}

func (r *recordingReporter) MaxNodesTotalReached(_ context.Context, n int) {
	r.calls = append(r.calls, fmt.Sprintf("max nodes total %d", n))
}

func (r *recordingReporter) UpdateDuration(function string, _ time.Duration) {
	r.functions[function] = true
}

func TestReporterSeesScaleUpsAndSteps(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 10, 0, templateNode("g", "4"))
	o := newOrchestrator(t, p, nil)
	r := &recordingReporter{functions: map[string]bool{}}
	o.report = r
	if _, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(3, "3")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"starting g 0->3", "scaled g 0->3"}, r.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	for _, f := range []string{metrics.FunctionFilterOutSchedulable, metrics.FunctionBuildPodEquivalenceGroups, metrics.FunctionEstimate} {
		if !r.functions[f] {
			t.Errorf("no duration for %s", f)
		}
	}
}

func TestReporterSeesLimits(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 10, 0, templateNode("g", "4"))
	// --cores-total 0:3 leaves no room for a 4-core node.
	o := newOrchestrator(t, p, func(o *Options) { o.Cores.Max = 3 })
	r := &recordingReporter{functions: map[string]bool{}}
	o.report = r
	if _, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(1, "1")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"skipped " + metrics.CPUResourceLimit}, r.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// --max-nodes-total 1 with one node already there.
	o = newOrchestrator(t, p, func(o *Options) { o.MaxNodesTotal = 1 })
	r = &recordingReporter{functions: map[string]bool{}}
	o.report = r
	n := templateNode("n1", "1")
	if _, err := runLoop(ctx, o, Input{Now: time.Now(), Nodes: []*apiv1.Node{n}, Pending: pendingPods(1, "2")}); err != nil {
		t.Fatal(err)
	}
	if len(r.calls) == 0 || r.calls[0] != "max nodes total 1" {
		t.Errorf("calls %v, want max nodes total 1 first", r.calls)
	}
}
