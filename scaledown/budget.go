package scaledown

import (
	"context"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
)

// groupRoom is what a group can lose this loop.
type groupRoom struct {
	// target is the group's size as the provider reports it now (deletions
	// finished earlier, in this loop too, are already out of it).
	target int
	// deleting counts the group's nodes whose removal is under way and
	// not yet out of target: removals this actuator started (drains, empty
	// nodes waiting out their delays) and nodes another run tainted
	// ToBeDeleted.
	deleting int
	// left is how many more nodes may go before the group's min size.
	left int
}

// room computes, per group, how many nodes may still go: the provider's
// target size now, less the removals in flight, less the min size.
func (p *Planner) room(ctx context.Context, in Input) map[string]*groupRoom {
	logger := klog.FromContext(ctx)
	deleting := map[string]map[string]bool{}
	mark := func(group, node string) {
		if in.deleted[node] {
			return
		}
		if deleting[group] == nil {
			deleting[group] = map[string]bool{}
		}
		deleting[group][node] = true
	}
	for node, group := range in.deleting {
		mark(group, node)
	}
	out := map[string]*groupRoom{}
	for _, gs := range in.State.Groups() {
		id := gs.NodeGroup.Id()
		for _, n := range gs.Nodes {
			if hasTaint(n, ToBeDeletedTaint) {
				mark(id, n.Name)
			}
		}
		r := &groupRoom{deleting: len(deleting[id])}
		target, err := gs.NodeGroup.TargetSize(ctx)
		if err != nil {
			// Without the size, nothing of the group goes this loop.
			logger.V(2).Info("Reading a node group's size failed; no scale-down of it this loop", "nodeGroup", id, "err", err)
			out[id] = r
			continue
		}
		r.target = target
		r.left = max(0, target-r.deleting-gs.NodeGroup.MinSize())
		out[id] = r
	}
	return out
}

// pick chooses the removable nodes among the unneeded ones: their unneeded
// (or unready) time has passed and their group can lose them. A
// zeroOrMaxNodeScaling group loses all its nodes at once or none.
func (p *Planner) pick(ctx context.Context, plan *Plan, in Input) {
	room := p.room(ctx, in)
	floors := p.floorsLeft(ctx, in)
	sort.SliceStable(plan.Unneeded, func(i, j int) bool { return plan.Unneeded[i].Since.Before(plan.Unneeded[j].Since) })
	atomic := map[string][]*Candidate{}
	for _, c := range plan.Unneeded {
		id := c.Group.Id()
		gs := in.State.Group(id)
		wait, reason := gs.Options.ScaleDownUnneededTime, ReasonNotUnneededLongEnough
		if c.Unready {
			wait, reason = gs.Options.ScaleDownUnreadyTime, ReasonNotUnreadyLongEnough
		}
		r := room[id]
		switch {
		case in.Now.Sub(c.Since) < wait:
			plan.Unremovable[c.Node.Name] = reason
		case gs.Options.ZeroOrMaxNodeScaling:
			atomic[id] = append(atomic[id], c)
		case r == nil || r.left <= 0:
			plan.Unremovable[c.Node.Name] = ReasonNodeGroupMinSizeReached
		case floors.failed != nil:
			plan.Unremovable[c.Node.Name] = ReasonUnexpectedError
		default:
			if over := floors.take(c.Node, p.report); len(over) > 0 {
				keepForMinimums(ctx, plan, c.Node.Name, over)
				continue
			}
			r.left--
			plan.Removable = append(plan.Removable, c)
		}
	}
	ids := make([]string, 0, len(atomic))
	for id := range atomic {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		cs := atomic[id]
		reason := atomicVerdict(in.State.Group(id), cs, room[id])
		if reason == "" && floors.failed != nil {
			reason = ReasonUnexpectedError
		}
		if reason == "" {
			nodes := make([]*apiv1.Node, len(cs))
			for i, c := range cs {
				nodes[i] = c.Node
			}
			if over := floors.takeAll(nodes, p.report); len(over) > 0 {
				for _, c := range cs {
					keepForMinimums(ctx, plan, c.Node.Name, over)
				}
				continue
			}
		}
		if reason != "" {
			klog.FromContext(ctx).V(4).Info("A zeroOrMaxNodeScaling group keeps its nodes", "nodeGroup", id,
				"removable", len(cs), "reason", reason)
			for _, c := range cs {
				plan.Unremovable[c.Node.Name] = reason
			}
			continue
		}
		room[id].left = 0
		for _, c := range cs {
			c.Atomic = true
			plan.Removable = append(plan.Removable, c)
		}
	}
}

// atomicVerdict says why the removable nodes cs of a zeroOrMaxNodeScaling
// group cannot all go now ("" when they can): every node of the group,
// registered or not, must be among them, nothing of the group may be
// being deleted already, and its min size must allow zero.
func atomicVerdict(gs *clusterstate.GroupState, cs []*Candidate, r *groupRoom) string {
	switch {
	case r == nil:
		return ReasonAtomicScaleDownFailed
	case gs.NodeGroup.MinSize() > 0:
		return ReasonNodeGroupMinSizeReached
	case len(cs) != len(gs.Nodes) || len(cs) != r.target || r.deleting > 0:
		return ReasonAtomicScaleDownFailed
	}
	return ""
}

// gpusOf tells a node's GPU type and count: its extended GPU resource or
// the GPU devices of the ResourceSlices it publishes in the session.
func (p *Planner) gpusOf(s Session) func(*apiv1.Node) (string, int64) {
	return func(n *apiv1.Node) (string, int64) {
		var slices []*resourceapi.ResourceSlice
		if s != nil {
			slices = slicesOf(s, n.Name)
		}
		return cloudprovider.GPUsWithDevices(context.Background(), p.provider, n, slices)
	}
}

// keepForMinimums keeps a node because its removal would take the
// resources of the nodes some minimums count below them (over names them).
func keepForMinimums(ctx context.Context, plan *Plan, node string, over []string) {
	klog.FromContext(ctx).V(2).Info("Skipping scale down of a node in this batch: it would violate minimum limits",
		"node", node, "minimums", over)
	plan.Unremovable[node] = ReasonMinimalResourceLimit
	if plan.Details == nil {
		plan.Details = map[string]string{}
	}
	plan.Details[node] = "would go below the minimum of " + strings.Join(over, "; ")
}
