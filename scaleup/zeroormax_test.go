package scaleup

import (
	"context"
	"strings"
	"testing"
	"time"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

func zeroOrMaxGroup(p *fakeprovider.Provider, id string, max int) {
	ng := p.AddNodeGroup(id, 0, max, 0, templateNode(id, "4"))
	o := config.Defaults().NodeGroupDefaults
	o.ZeroOrMaxNodeScaling = true
	ng.SetOptions(&o)
}

// A zeroOrMaxNodeScaling group goes from empty to its max size in one
// atomic increase, however few nodes the pods need.
func TestZeroOrMaxScalesToMaxAtomically(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	zeroOrMaxGroup(provider, "slice", 4)
	o := newOrchestrator(t, provider, nil)
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(2, "1")})
	if err != nil {
		t.Fatal(err)
	}
	if got := increases(res)["slice"]; got != 4 {
		t.Fatalf("slice +%d, want +4 (its max size)", got)
	}
	var atomic int
	for _, c := range provider.Calls() {
		switch c.Method {
		case "AtomicIncreaseSize":
			atomic++
		case "IncreaseSize":
			t.Errorf("non-atomic IncreaseSize(%d) on a zeroOrMax group", c.Delta)
		}
	}
	if atomic != 1 {
		t.Errorf("%d AtomicIncreaseSize calls, want 1", atomic)
	}
}

// When the limits leave room for only part of the group, it is not scaled
// up at all, and the pods say why.
func TestZeroOrMaxNeverScalesPartWay(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	zeroOrMaxGroup(provider, "slice", 4)
	o := newOrchestrator(t, provider, func(o *Options) { o.MaxNodesTotal = 3 })
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(2, "1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Increases) != 0 || targetOf(t, provider, "slice") != 0 {
		t.Fatalf("increases %v, want none", increases(res))
	}
	for _, reason := range res.Remaining {
		if !strings.Contains(reason, "zeroOrMaxNodeScaling") {
			t.Errorf("reason %q does not name zeroOrMaxNodeScaling", reason)
		}
	}
}

// Balancing similar groups never splits a zeroOrMax group's share.
func TestZeroOrMaxIsNotBalanced(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	zeroOrMaxGroup(provider, "a", 3)
	provider.AddNodeGroup("b", 0, 10, 0, templateNode("a", "4"))
	o := newOrchestrator(t, provider, func(o *Options) {
		o.BalanceSimilarNodeGroups = true
		o.Expanders = []string{config.LeastNodesExpander}
	})
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(12, "1")})
	if err != nil {
		t.Fatal(err)
	}
	got := increases(res)
	if got["a"] != 0 && got["a"] != 3 {
		t.Errorf("zeroOrMax group a +%d: only 0 or 3 allowed (increases %v)", got["a"], got)
	}
	if got["a"]+got["b"] < 3 {
		t.Errorf("increases %v do not serve 12 pods", got)
	}
}
