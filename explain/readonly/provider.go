package readonly

import (
	"context"
	"fmt"
	"sync"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Increase is an increase a node group was asked for and did not make.
type Increase struct {
	NodeGroup string `json:"nodeGroup"`
	Delta     int    `json:"delta"`
	Atomic    bool   `json:"atomic,omitempty"`
}

// Provider wraps a cloud provider so that its node groups never change:
// increases are recorded (Increases) and answered with success, so that a
// simulated loop goes on as if they had been made; deletions and target
// decreases fail with ErrWrite; Cleanup is not forwarded.
type Provider struct {
	cloudprovider.CloudProvider
	mu        sync.Mutex
	increases []Increase
}

// NewProvider wraps p.
func NewProvider(p cloudprovider.CloudProvider) *Provider { return &Provider{CloudProvider: p} }

// Increases are the increases asked for so far.
func (p *Provider) Increases() []Increase {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Increase(nil), p.increases...)
}

// Cleanup implements cloudprovider.CloudProvider without forwarding: a
// provider's Cleanup saves or hands back its state (the kwok provider
// writes its ConfigMap, the external gRPC one calls the server's Cleanup),
// and a read-only run has nothing to save.
func (p *Provider) Cleanup(context.Context) error { return nil }

// NodeGroups implements cloudprovider.CloudProvider.
func (p *Provider) NodeGroups(ctx context.Context) ([]cloudprovider.NodeGroup, error) {
	groups, err := p.CloudProvider.NodeGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cloudprovider.NodeGroup, len(groups))
	for i, g := range groups {
		out[i] = &nodeGroup{NodeGroup: g, p: p}
	}
	return out, nil
}

// NodeGroupForNode implements cloudprovider.CloudProvider.
func (p *Provider) NodeGroupForNode(ctx context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	g, err := p.CloudProvider.NodeGroupForNode(ctx, node)
	if err != nil || g == nil {
		return g, err
	}
	return &nodeGroup{NodeGroup: g, p: p}, nil
}

type nodeGroup struct {
	cloudprovider.NodeGroup
	p *Provider
}

func (g *nodeGroup) record(delta int, atomic bool) error {
	if delta <= 0 {
		return fmt.Errorf("size increase of node group %s must be positive, got %d", g.Id(), delta)
	}
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	g.p.increases = append(g.p.increases, Increase{NodeGroup: g.Id(), Delta: delta, Atomic: atomic})
	return nil
}

func (g *nodeGroup) IncreaseSize(_ context.Context, delta int) error { return g.record(delta, false) }

func (g *nodeGroup) AtomicIncreaseSize(_ context.Context, delta int) error {
	return g.record(delta, true)
}

func (g *nodeGroup) DeleteNodes(context.Context, []*apiv1.Node) error {
	return fmt.Errorf("deleting nodes of %s: %w", g.Id(), ErrWrite)
}

func (g *nodeGroup) ForceDeleteNodes(context.Context, []*apiv1.Node) error {
	return fmt.Errorf("deleting nodes of %s: %w", g.Id(), ErrWrite)
}

func (g *nodeGroup) DecreaseTargetSize(context.Context, int) error {
	return fmt.Errorf("decreasing the target size of %s: %w", g.Id(), ErrWrite)
}
