package disruption

import (
	"context"
	"time"

	apiv1 "k8s.io/api/core/v1"
)

// BudgetLeft returns, per node group of nodes (each node's group as the
// provider says), how many more of the group's nodes may start being
// disrupted for reason at now, as the engine's intake judges it: the group's
// budget less its nodes in flight. The consolidation planner sizes its sets
// of nodes replaced by one new node with it, so that no set waits for a
// budget its group, shrinking as it goes, may never give (a set of 2 nodes
// of a group of 10 under the default 10%). A group with no budget limit for
// reason gets its size.
func (h *Engine) BudgetLeft(ctx context.Context, reason Reason, nodes []*apiv1.Node, now time.Time) map[string]int {
	size := map[string]int{}
	for _, n := range nodes {
		if g, err := h.provider.NodeGroupForNode(ctx, n); err == nil && g != nil {
			size[g.Id()]++
		}
	}
	h.mu.Lock()
	h.rmu.Lock()
	disrupting := h.disruptingLocked()
	h.rmu.Unlock()
	h.mu.Unlock()
	out := make(map[string]int, len(size))
	for id, n := range size {
		out[id] = h.budget.Allowed(id, reason, n, disrupting[id], now)
	}
	return out
}
