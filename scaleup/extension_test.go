package scaleup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// A node group the loop's node-group-list processors excluded is not grown,
// and the pods it alone could serve carry the reason.
func TestExcludedNodeGroupIsNotGrown(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	o := newOrchestrator(t, provider, nil)
	res, err := runLoop(ctx, o, Input{Now: now, Pending: pendingPods(10, "1"),
		Excluded: map[string]string{"small": "reserved for the night shift"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := increases(res); got["small"] != 0 || got["large"] != 1 {
		t.Fatalf("increases = %v, want large +1 and small untouched", got)
	}

	// With both excluded, nothing grows and the reason reaches the pods.
	provider = fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	o = newOrchestrator(t, provider, nil)
	res, err = runLoop(ctx, o, Input{Now: now, Pending: pendingPods(3, "1"),
		Excluded: map[string]string{"small": "reserved for the night shift", "large": "reserved for the night shift"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Increases) != 0 || len(res.Remaining) != 3 {
		t.Fatalf("increases %v, remaining %d; want none and 3", increases(res), len(res.Remaining))
	}
	for _, reason := range res.Remaining {
		if !strings.Contains(reason, "reserved for the night shift") {
			t.Errorf("remaining reason %q does not name the exclusion", reason)
		}
	}
}

// templateFunc adapts a function to TemplateProcessor.
type templateFunc func(context.Context, cloudprovider.NodeGroup, *cloudprovider.NodeInfo) (*cloudprovider.NodeInfo, error)

func (f templateFunc) ProcessTemplate(ctx context.Context, g cloudprovider.NodeGroup, info *cloudprovider.NodeInfo) (*cloudprovider.NodeInfo, error) {
	return f(ctx, g, info)
}

// Template processors run in order on every group's template; the session
// simulates with what they return, and a failing one leaves its group out.
func TestTemplateProcessorsShapeTheTemplate(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	var order []string
	// The first halves the small group's CPU (a reserved share, say); the
	// second sees its result.
	halve := templateFunc(func(_ context.Context, g cloudprovider.NodeGroup, info *cloudprovider.NodeInfo) (*cloudprovider.NodeInfo, error) {
		order = append(order, "halve:"+g.Id())
		if g.Id() != "small" {
			return info, nil
		}
		node := info.Node.DeepCopy()
		node.Status.Allocatable[apiv1.ResourceCPU] = resource.MustParse("2")
		out := *info
		out.Node = node
		return &out, nil
	})
	failLarge := templateFunc(func(_ context.Context, g cloudprovider.NodeGroup, info *cloudprovider.NodeInfo) (*cloudprovider.NodeInfo, error) {
		order = append(order, "check:"+g.Id())
		if g.Id() == "large" {
			return nil, errors.New("image not approved")
		}
		if got := info.Node.Status.Allocatable[apiv1.ResourceCPU]; got.String() != "2" {
			t.Errorf("the second processor saw %s CPU for small, want the first one's 2", got.String())
		}
		return info, nil
	})
	o := newOrchestrator(t, provider, nil)
	WithTemplateProcessors(halve, failLarge)(o)
	res, err := runLoop(ctx, o, Input{Now: now, Pending: pendingPods(4, "1")})
	if err != nil {
		t.Fatal(err)
	}
	// 4 pods of 1 CPU on 2-CPU small nodes: 2 nodes; large is left out.
	if got := increases(res); got["small"] != 2 || got["large"] != 0 {
		t.Fatalf("increases = %v, want small +2 (halved template) and large untouched", got)
	}
	if !strings.Contains(strings.Join(order, " "), "halve:small check:small") {
		t.Errorf("processors ran as %v, want halve then check for each group", order)
	}
	// The provider's template is not modified.
	groups, _ := provider.NodeGroups(ctx)
	for _, g := range groups {
		if g.Id() != "small" {
			continue
		}
		info, err := g.TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Node.Status.Allocatable[apiv1.ResourceCPU]; got.String() != "4" {
			t.Errorf("provider's template has %s CPU after the session, want 4", got.String())
		}
	}
}
