package scaleup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// beginLoop updates the cluster state and starts a session, as the loop does.
func beginLoop(t *testing.T, o *Orchestrator, nodes []*apiv1.Node) *Session {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if err := o.state.Update(ctx, o.provider, nodes, now); err != nil {
		t.Fatal(err)
	}
	return o.Begin(ctx, Input{Now: now, Nodes: nodes})
}

func calls(p *fakeprovider.Provider, method string) []fakeprovider.Call {
	var out []fakeprovider.Call
	for _, c := range p.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func TestScaleUpAllOneGroup(t *testing.T) {
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	o := newOrchestrator(t, provider, func(o *config.Options) { o.MaxNodesPerScaleUp = 1 })
	res := beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(12, "1"))
	if !res.Fit || res.Err != nil {
		t.Fatalf("result %+v, want a fit", res)
	}
	// least-waste: three 4-CPU nodes; --max-nodes-per-scaleup=1 does not cut an atomic request.
	if got := calls(provider, "AtomicIncreaseSize"); len(got) != 1 || got[0].Group != "small" || got[0].Delta != 3 {
		t.Errorf("AtomicIncreaseSize calls %+v, want small +3", got)
	}
	if len(res.Instances["small"]) != 3 {
		t.Errorf("instances %v, want the three new ones", res.Instances)
	}
}

func TestScaleUpAllSplitsOverGroups(t *testing.T) {
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("a", 0, 2, 0, templateNode("a", "4"))
	provider.AddNodeGroup("b", 0, 3, 0, templateNode("b", "4"))
	o := newOrchestrator(t, provider, nil)
	res := beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(16, "1"))
	if !res.Fit {
		t.Fatalf("result %+v, want a fit", res)
	}
	// Neither group holds four nodes: both are used.
	if got := increases(Result{Increases: res.Increases}); got["a"]+got["b"] != 4 || got["a"] == 0 || got["b"] == 0 {
		t.Errorf("increases %v, want four nodes over both groups", got)
	}
}

func TestScaleUpAllChangesNothingWhenItCannotFit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		target    int
		mutate    func(*config.Options)
		permanent bool
		reason    string
	}{
		{name: "larger than the group's max", target: 0, permanent: true, reason: "pods have no room"},
		{name: "group nearly full now", target: 9, permanent: false, reason: "pods have no room"},
		{name: "max nodes total", target: 0, mutate: func(o *config.Options) { o.MaxNodesTotal = 3 }, permanent: true,
			reason: "limited by max-nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("a", 0, 10, tc.target, templateNode("a", "4"))
			var nodes []*apiv1.Node
			for i := 0; i < tc.target; i++ {
				n := templateNode("a", "4")
				n.Name = "a-" + string(rune('0'+i))
				provider.AddNode("a", n)
				nodes = append(nodes, n)
				// each existing node is full
			}
			o := newOrchestrator(t, provider, tc.mutate)
			s := beginLoop(t, o, nodes)
			for _, n := range nodes {
				full := pendingPods(1, "4")[0]
				full.Name, full.UID = "full-"+n.Name, "full-"+n.UID
				if rest := s.Place(context.Background(), []*apiv1.Pod{full}, true); len(rest) != 0 {
					t.Fatal("could not fill an existing node")
				}
			}
			pods := pendingPods(44, "1") // eleven nodes, more than the max
			switch {
			case tc.target > 0:
				pods = pendingPods(36, "1") // nine nodes: within the max, not within the room left
			case tc.mutate != nil:
				pods = pendingPods(16, "1") // four nodes
			}
			res := s.ScaleUpAll(context.Background(), pods)
			if res.Fit || len(res.Increases) != 0 || res.Permanent != tc.permanent || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("result fit=%v increases=%v permanent=%v reason=%q; want no fit, permanent=%v, reason with %q",
					res.Fit, res.Increases, res.Permanent, res.Reason, tc.permanent, tc.reason)
			}
			if c := calls(provider, "AtomicIncreaseSize"); len(c) != 0 {
				t.Errorf("increases made: %+v", c)
			}
		})
	}
}

func TestScaleUpAllRollsBackWhenALaterIncreaseFails(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	// most-pods prefers b (three nodes, 12 pods) and then needs a, which fails.
	provider.AddNodeGroup("a", 0, 2, 0, templateNode("a", "4"))
	provider.AddNodeGroup("b", 0, 3, 0, templateNode("b", "4"))
	provider.InjectError("AtomicIncreaseSize", "a", cloudprovider.ErrNotImplemented)
	provider.InjectError("IncreaseSize", "a", errors.New("quota exceeded"))
	o := newOrchestrator(t, provider, func(o *config.Options) { o.Expanders = []string{config.MostPodsExpander} })
	res := beginLoop(t, o, nil).ScaleUpAll(ctx, pendingPods(16, "1"))
	if res.Fit || res.Err == nil || !strings.Contains(res.Reason, "quota exceeded") {
		t.Fatalf("result %+v, want the failure", res)
	}
	ngs, _ := provider.NodeGroups(ctx)
	for _, ng := range ngs {
		size, _ := ng.TargetSize(ctx)
		instances, _ := ng.Nodes(ctx)
		if size != 0 || len(instances) != 0 {
			t.Errorf("%s: target %d, %d instances after the rollback; want none", ng.Id(), size, len(instances))
		}
	}
	if c := calls(provider, "ForceDeleteNodes"); len(c) != 1 || c[0].Group != "b" || len(c[0].Nodes) != 3 {
		t.Errorf("deletions %+v, want b's three new instances by name", c)
	}
	// a fell back from AtomicIncreaseSize to IncreaseSize.
	if c := calls(provider, "IncreaseSize"); len(c) != 1 || c[0].Group != "a" {
		t.Errorf("IncreaseSize calls %+v, want the fallback on a", c)
	}
}

// A request for 2,000 nodes is not cut to --max-nodes-per-scaleup (1000 by
// default): it goes out whole in one AtomicIncreaseSize, or not at all.
func TestScaleUpAllIgnoresMaxNodesPerScaleUp(t *testing.T) {
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("big", 0, 3000, 0, templateNode("big", "4"))
	o := newOrchestrator(t, provider, nil)
	if o.opts.MaxNodesPerScaleUp != 1000 {
		t.Fatalf("default --max-nodes-per-scaleup = %d, want 1000", o.opts.MaxNodesPerScaleUp)
	}
	res := beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(8000, "1"))
	if !res.Fit {
		t.Fatalf("result %+v, want a fit", res.Reason)
	}
	if c := calls(provider, "AtomicIncreaseSize"); len(c) != 1 || c[0].Delta != 2000 {
		t.Errorf("AtomicIncreaseSize calls %+v, want one of 2000", c)
	}
	// The same request against a group whose max is 1,999 can never fit.
	provider = fakeprovider.NewProvider()
	provider.AddNodeGroup("big", 0, 1999, 0, templateNode("big", "4"))
	o = newOrchestrator(t, provider, nil)
	res = beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(8000, "1"))
	if res.Fit || !res.Permanent || len(calls(provider, "AtomicIncreaseSize")) != 0 {
		t.Errorf("result fit=%v permanent=%v reason=%q; want a permanent refusal and no call", res.Fit, res.Permanent, res.Reason)
	}
}
