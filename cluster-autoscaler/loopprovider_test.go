package main

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// benchProvider is the in-process loop benchmark's cloud provider: groups
// of running instances, one per node, found by provider ID through a map as
// a real provider's cache would (the fake provider scans its instances and
// records every call, which at 15,000 nodes would be the benchmark's cost).
type benchProvider struct {
	mu     sync.Mutex
	groups []*benchNodeGroup
	byID   map[string]*benchNodeGroup // provider ID -> group
}

var _ cloudprovider.CloudProvider = (*benchProvider)(nil)

// newBenchProvider makes one group per spec, each of max size twice its
// nodes plus 5,000.
func newBenchProvider(c *loopCluster) *benchProvider {
	p := &benchProvider{byID: map[string]*benchNodeGroup{}}
	providerIDs := make(map[string]string, len(c.Nodes))
	for _, n := range c.Nodes {
		providerIDs[n.Name] = n.Spec.ProviderID
	}
	for _, spec := range c.Groups {
		g := &benchNodeGroup{p: p, id: spec.ID, max: 2*len(spec.Nodes) + 5000, target: len(spec.Nodes),
			template: spec.Template}
		for _, name := range spec.Nodes {
			id := providerIDs[name]
			g.instances = append(g.instances, cloudprovider.Instance{Id: id,
				Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
			p.byID[id] = g
		}
		p.groups = append(p.groups, g)
	}
	return p
}

func (p *benchProvider) Name() string { return "bench" }

func (p *benchProvider) NodeGroups(context.Context) ([]cloudprovider.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cloudprovider.NodeGroup, len(p.groups))
	for i, g := range p.groups {
		out[i] = g
	}
	return out, nil
}

func (p *benchProvider) NodeGroupForNode(_ context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g := p.byID[node.Spec.ProviderID]; g != nil {
		return g, nil
	}
	return nil, nil
}

func (p *benchProvider) HasInstance(_ context.Context, node *apiv1.Node) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byID[node.Spec.ProviderID] != nil, nil
}

func (p *benchProvider) Pricing(context.Context) (cloudprovider.PricingModel, error) {
	return nil, cloudprovider.ErrNotImplemented
}

func (p *benchProvider) GetResourceLimiter(context.Context) (*cloudprovider.ResourceLimiter, error) {
	return cloudprovider.NewResourceLimiter(nil, nil), nil
}

func (p *benchProvider) GPULabel() string                                         { return "bench.autoscaler/gpu" }
func (p *benchProvider) GetAvailableGPUTypes(context.Context) map[string]struct{} { return nil }
func (p *benchProvider) GetNodeGpuConfig(context.Context, *apiv1.Node) *cloudprovider.GpuConfig {
	return nil
}
func (p *benchProvider) Refresh(context.Context) error { return nil }
func (p *benchProvider) Cleanup(context.Context) error { return nil }

// target tells group id's target size.
func (p *benchProvider) target(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.groups {
		if g.id == id {
			return g.target
		}
	}
	return -1
}

// benchNodeGroup is a group of benchProvider.
type benchNodeGroup struct {
	p         *benchProvider
	id        string
	max       int
	target    int
	template  *apiv1.Node
	instances []cloudprovider.Instance
}

var _ cloudprovider.NodeGroup = (*benchNodeGroup)(nil)

func (g *benchNodeGroup) Id() string            { return g.id }
func (g *benchNodeGroup) MinSize() int          { return 0 }
func (g *benchNodeGroup) MaxSize() int          { return g.max }
func (g *benchNodeGroup) Debug() string         { return g.id }
func (g *benchNodeGroup) Exist() bool           { return true }
func (g *benchNodeGroup) Autoprovisioned() bool { return false }

func (g *benchNodeGroup) TargetSize(context.Context) (int, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.target, nil
}

func (g *benchNodeGroup) IncreaseSize(_ context.Context, delta int) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if delta <= 0 || g.target+delta > g.max {
		return fmt.Errorf("increase of %s by %d: out of range (target %d, max %d)", g.id, delta, g.target, g.max)
	}
	g.target += delta
	return nil
}

func (g *benchNodeGroup) AtomicIncreaseSize(ctx context.Context, delta int) error {
	return g.IncreaseSize(ctx, delta)
}

func (g *benchNodeGroup) DeleteNodes(_ context.Context, nodes []*apiv1.Node) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	for _, n := range nodes {
		i := slices.IndexFunc(g.instances, func(in cloudprovider.Instance) bool { return in.Id == n.Spec.ProviderID })
		if i < 0 {
			return fmt.Errorf("node %s is not in group %s", n.Name, g.id)
		}
		g.instances = slices.Delete(g.instances, i, i+1)
		delete(g.p.byID, n.Spec.ProviderID)
		g.target--
	}
	return nil
}

func (g *benchNodeGroup) ForceDeleteNodes(ctx context.Context, nodes []*apiv1.Node) error {
	return g.DeleteNodes(ctx, nodes)
}

func (g *benchNodeGroup) DecreaseTargetSize(_ context.Context, delta int) error {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if delta >= 0 || g.target+delta < len(g.instances) {
		return fmt.Errorf("decrease of %s by %d: out of range", g.id, delta)
	}
	g.target += delta
	return nil
}

func (g *benchNodeGroup) Nodes(context.Context) ([]cloudprovider.Instance, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return slices.Clone(g.instances), nil
}

func (g *benchNodeGroup) TemplateNodeInfo(context.Context) (*cloudprovider.NodeInfo, error) {
	return &cloudprovider.NodeInfo{Node: g.template.DeepCopy()}, nil
}

func (g *benchNodeGroup) GetOptions(context.Context, config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	return nil, cloudprovider.ErrNotImplemented
}
