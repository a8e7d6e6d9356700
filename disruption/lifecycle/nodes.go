package lifecycle

import (
	"cmp"
	"context"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// GroupLookup finds the node group of a node; cloudprovider.CloudProvider
// implements it. A nil group means the autoscaler does not manage the node.
type GroupLookup interface {
	NodeGroupForNode(ctx context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error)
}

// toBeDeletedTaint is the taint the autoscaler puts on a node it deletes
// (clusterstate.ToBeDeletedTaint; not imported, to keep this package off
// clusterstate's dependencies).
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// groupNode is a node that a lifecycle source may propose, with its group.
type groupNode struct {
	node  *apiv1.Node
	group cloudprovider.NodeGroup
}

// eligible returns the nodes of nodes that a lifecycle source may propose,
// each with its group: Ready nodes of an existing node group that are not
// being deleted. A node that is not Ready is node healing's to judge (the unhealthy reason, under healing's breaker): were
// expiry or drift to replace it, a cluster-wide failure that makes many
// nodes not Ready would be replaced around the breaker. Once the node is
// Ready again it is proposed in the next loop.
func eligible(ctx context.Context, groups GroupLookup, nodes []*apiv1.Node, source string) []groupNode {
	logger := klog.FromContext(ctx)
	out := make([]groupNode, 0, len(nodes))
	for _, n := range nodes {
		switch {
		case n.DeletionTimestamp != nil:
			continue
		case hasTaint(n, toBeDeletedTaint):
			continue
		case !ready(n):
			logger.V(5).Info("Node not Ready, left to healing", "source", source, "node", klog.KObj(n))
			continue
		}
		g, err := groups.NodeGroupForNode(ctx, n)
		if err != nil {
			logger.V(4).Info("Node group lookup failed, node skipped", "source", source, "node", klog.KObj(n), "err", err)
			continue
		}
		if g == nil || !g.Exist() {
			continue
		}
		out = append(out, groupNode{node: n, group: g})
	}
	return out
}

// proposal is a candidate with its node's creation time, to sort by.
type proposal struct {
	created   time.Time
	candidate disruption.Candidate
}

// oldestFirst returns the candidates of ps, the oldest node first (then by
// name): a budget that lets some go lets the oldest go first.
func oldestFirst(ps []proposal) []disruption.Candidate {
	if len(ps) == 0 {
		return nil
	}
	slices.SortFunc(ps, func(a, b proposal) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return cmp.Compare(a.candidate.Nodes[0], b.candidate.Nodes[0])
	})
	out := make([]disruption.Candidate, len(ps))
	for i := range ps {
		out[i] = ps[i].candidate
	}
	return out
}

func ready(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
