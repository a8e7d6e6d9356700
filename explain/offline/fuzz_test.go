package offline

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// FuzzLoad: whatever the dump, Load and the provider built from what it
// accepts answer or fail; they never panic, nor does loading the dump's
// objects.
func FuzzLoad(f *testing.F) {
	f.Add(dump)
	f.Add(oldDump)
	f.Add(`{"StartTimestamp":"2026-11-27T10:00:00Z","NodeGroups":[null,{"Id":"a"}],"NodeGroupOfNode":{"n":"zz"},
		"NodeList":[{"Node":{"metadata":{"name":"n"}},"Pods":[null]}],"TemplateNodes":{"a":null,"b":{"Node":null}},
		"GPUConfigs":{"n":null},"Objects":{"DaemonSets":[null]},"PodPrices":{}}`)
	f.Fuzz(func(t *testing.T, in string) {
		ctx := context.Background()
		snap, _, err := Load(strings.NewReader(in))
		if err != nil {
			return
		}
		p := NewProvider(snap)
		groups, _ := p.NodeGroups(ctx)
		for _, g := range groups {
			_, _ = g.TargetSize(ctx)
			_, _ = g.Nodes(ctx)
			_, _ = g.TemplateNodeInfo(ctx)
			_, _ = g.GetOptions(ctx, config.NodeGroupAutoscalingOptions{})
		}
		for _, sn := range snap.NodeList {
			_, _ = p.NodeGroupForNode(ctx, sn.Node)
			_, _ = p.HasInstance(ctx, sn.Node)
			_ = p.GetNodeGpuConfig(ctx, sn.Node)
			if pricing, err := p.Pricing(ctx); err == nil {
				_, _ = pricing.NodePrice(ctx, sn.Node, snap.StartTimestamp, snap.StartTimestamp.Add(time.Hour))
			}
		}
		_, _ = p.GetResourceLimiter(ctx)
		client := fake.NewClientset()
		for _, o := range Objects(snap) {
			_ = client.Tracker().Add(o)
		}
	})
}
