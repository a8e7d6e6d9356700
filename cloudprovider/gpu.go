package cloudprovider

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
)

// GPUsOf returns the GPU type of node, as the provider names it, and how
// many it has (0 without GPU).
func GPUsOf(ctx context.Context, provider CloudProvider, n *apiv1.Node) (string, int64) {
	if provider == nil || n == nil {
		return "", 0
	}
	c := provider.GetNodeGpuConfig(ctx, n)
	if c == nil {
		return "", 0
	}
	name := c.ExtendedResourceName
	if name == "" {
		name = "nvidia.com/gpu"
	}
	q, ok := n.Status.Capacity[name]
	if !ok {
		return c.Type, 0
	}
	return c.Type, q.Value()
}
