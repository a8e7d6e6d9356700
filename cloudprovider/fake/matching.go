package fake

import (
	"context"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Matching is a Provider with a matching of Nodes to instances of its own,
// as Cluster API has through a Machine's status.nodeRef: Refs names, by Node
// name, the listed instance id a Node is, whatever its provider ID says;
// other Nodes are matched by provider ID. It implements
// cloudprovider.InstanceMatcher.
type Matching struct {
	*Provider
	Refs map[string]string
}

var _ cloudprovider.InstanceMatcher = Matching{}

// InstanceOfNode implements cloudprovider.InstanceMatcher.
func (p Matching) InstanceOfNode(_ context.Context, n *apiv1.Node) (string, bool, error) {
	if id, ok := p.Refs[n.Name]; ok {
		return id, true, nil
	}
	return n.Spec.ProviderID, n.Spec.ProviderID != "", nil
}

// NodeGroupForNode implements cloudprovider.CloudProvider: by provider ID,
// else the group that lists the Node's instance in Refs.
func (p Matching) NodeGroupForNode(ctx context.Context, n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	if g, err := p.Provider.NodeGroupForNode(ctx, n); g != nil || err != nil {
		return g, err
	}
	id, ok := p.Refs[n.Name]
	if !ok {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.groups {
		if g.hasInstance(id) {
			return g, nil
		}
	}
	return nil, nil
}
