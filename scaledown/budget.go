package scaledown

import (
	"context"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
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
	left := p.resourcesLeft(in)
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
		case !left.take(c.Node, p.report):
			plan.Unremovable[c.Node.Name] = ReasonMinimalResourceLimit
		default:
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

// resources are the cores and memory the cluster has above the
// --cores-total and --memory-total minimums; a minimum of 0 is no limit.
type resources struct {
	milliCPU, memory      int64
	limitCPU, limitMemory bool
	// gpus are the GPUs above the --gpu-total minimums, for the limited types.
	gpus  map[string]int64
	gpuOf func(*apiv1.Node) (string, int64)
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

// resourcesLeft counts the nodes that stay: not being deleted already.
func (p *Planner) resourcesLeft(in Input) *resources {
	r := &resources{milliCPU: -p.opts.Cores.Min * 1000, memory: -(p.opts.MemoryGiB.Min << 30),
		limitCPU: p.opts.Cores.Min > 0, limitMemory: p.opts.MemoryGiB.Min > 0}
	for _, l := range p.opts.GPUTotal {
		if l.Min > 0 {
			if r.gpus == nil {
				r.gpus = map[string]int64{}
				r.gpuOf = p.gpusOf(in.Session)
			}
			r.gpus[l.Type] = -l.Min
		}
	}
	for _, n := range in.Nodes {
		if hasTaint(n, ToBeDeletedTaint) || in.deleting[n.Name] != "" || in.deleted[n.Name] {
			continue
		}
		r.milliCPU += n.Status.Capacity.Cpu().MilliValue()
		r.memory += n.Status.Capacity.Memory().Value()
		if r.gpuOf != nil {
			if gpu, c := r.gpuOf(n); c > 0 {
				if _, limited := r.gpus[gpu]; limited {
					r.gpus[gpu] += c
				}
			}
		}
	}
	return r
}

// take removes node's cores and memory when the minimums allow it; when
// they do not, it counts a skipped scale-down per limit hit and reports false.
func (r *resources) take(node *apiv1.Node, report Reporter) bool {
	cpu, mem := node.Status.Capacity.Cpu().MilliValue(), node.Status.Capacity.Memory().Value()
	overCPU := r.limitCPU && r.milliCPU-cpu < 0
	overMemory := r.limitMemory && r.memory-mem < 0
	if report != nil {
		if overCPU {
			report.RegisterSkippedScaleEvent(metrics.DirectionScaleDown, metrics.CPUResourceLimit)
		}
		if overMemory {
			report.RegisterSkippedScaleEvent(metrics.DirectionScaleDown, metrics.MemoryResourceLimit)
		}
	}
	gpu, gpus := "", int64(0)
	if r.gpuOf != nil {
		gpu, gpus = r.gpuOf(node)
	}
	left, limitedGPU := r.gpus[gpu]
	overGPU := limitedGPU && gpus > 0 && left-gpus < 0
	if overCPU || overMemory || overGPU {
		return false
	}
	r.milliCPU -= cpu
	r.memory -= mem
	if limitedGPU && gpus > 0 {
		r.gpus[gpu] -= gpus
	}
	return true
}
