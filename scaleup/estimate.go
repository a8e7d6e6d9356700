package scaleup

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// Estimating the options: each eligible group's estimate within the
// limits left, the pods it helps, and the counts of groups the limits skip.

// options estimates every eligible group; refused says why the others are
// not options.
func (o *Orchestrator) options(ctx context.Context, podGroups []*estimator.Group, groups map[string]*groupState,
	totals *totals, deadline time.Time) ([]expander.Option, map[string]*cloudprovider.NodeInfo, *refusals) {
	var options []expander.Option
	infos := map[string]*cloudprovider.NodeInfo{}
	refused := newRefusals()
	refused.demands = o.sim.Snapshot().DeviceDemands
	if o.explain != nil {
		refused.keepVerdicts()
	}
	var estimating time.Duration
	defer func() { o.report.UpdateDuration(metrics.FunctionEstimate, estimating) }()
	nsCount := namespaces(podGroups)
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		gs := groups[id]
		if gs.skip != "" {
			refused.refuse(id, skipVerdict(gs))
			continue
		}
		left := deadline.Sub(o.clock.Now())
		if left <= 0 {
			refused.refuse(id, explain.NodeGroupVerdict{Cause: explain.CauseOther,
				Reason: "binpacking time budget (--max-binpacking-time) used up"})
			continue
		}
		room := gs.group.MaxSize() - gs.target
		if room <= 0 {
			refused.refuse(id, explain.NodeGroupVerdict{Cause: explain.CauseMaxSize, Reason: reasonMaxSize,
				Detail: fmt.Sprintf("target size %d, max size %d", gs.target, gs.group.MaxSize())})
			continue
		}
		limits := estimator.Limits{
			MaxNodes:       min(room, o.opts.MaxNodesPerScaleUp, totals.nodeRoom(o.opts.MaxNodesTotal)),
			MaxMilliCPU:    totals.cpuRoom(o.opts.Cores.Max),
			MaxMemoryBytes: totals.memoryRoom(o.opts.MemoryGiB.Max),
			Budget:         min(o.opts.MaxNodeGroupBinpackingDuration, left),
		}
		if exhausted(limits) {
			o.reportLimits(limits.MaxMilliCPU < 0, limits.MaxMemoryBytes < 0)
			refused.refuse(id, o.limitVerdict(o.exhaustedReason(limits), totals))
			continue
		}
		if totals.gpuOf != nil && gs.template != nil {
			if gpu, per := totals.gpuOf(gs.template.Node, gs.template.ResourceSlices); per > 0 {
				if gpuRoom, limited := totals.gpuRoom(o.opts.GPUTotal, gpu, per); limited {
					if gpuRoom <= 0 {
						refused.refuse(id, explain.NodeGroupVerdict{Cause: explain.CauseResourceLimit,
							Reason: fmt.Sprintf("max cluster %s GPU limit (--gpu-total) reached", gpu)})
						continue
					}
					limits.MaxNodes = min(limits.MaxNodes, gpuRoom)
				}
			}
		}
		if gs.template != nil {
			if qRoom, quota, limited := totals.quotaRoom(gs.template.Node); limited {
				if qRoom <= 0 {
					refused.refuse(id, explain.NodeGroupVerdict{Cause: explain.CauseResourceLimit,
						Reason: fmt.Sprintf("CapacityQuota %s reached", quota)})
					continue
				}
				limits.MaxNodes = min(limits.MaxNodes, qRoom)
			}
		}
		start := o.clock.Now()
		est, err := o.estimator.Estimate(ctx, podGroups, gs.template, id, limits)
		estimating += o.clock.Since(start)
		if gs.template != nil {
			o.report.Binpacking(gs.template.Node, nsCount, len(podGroups))
		}
		if err != nil {
			refused.refuse(id, explain.NodeGroupVerdict{Cause: explain.CauseOther, Reason: fmt.Sprintf("estimate failed: %v", err)})
			continue
		}
		if est.NodeCount == 0 {
			o.reportLimits(est.LimitedBy == estimator.LimitCPU, est.LimitedBy == estimator.LimitMemory)
			if est.LimitedBy != estimator.LimitNone {
				refused.refuse(id, o.limitVerdict(o.limitReason(est.LimitedBy), totals))
			} else {
				refused.estimateOf(id, podGroups, est, gs.template.Node)
			}
			continue
		}
		refused.unplaced(id, podGroups, est, gs.template.Node)
		if gs.zeroOrMax && est.NodeCount < room {
			if short := zeroOrMaxShortfall(room, limits, gs.template); short != "" {
				refused.refuse(id, explain.NodeGroupVerdict{Cause: explain.CauseOther, Reason: short})
				continue
			}
			est.NodeCount = room
		}
		options = append(options, expander.Option{NodeGroup: gs.group, NodeCount: est.NodeCount, Pods: est.Scheduled,
			Debug: fmt.Sprintf("%s: %d nodes for %d pods", id, est.NodeCount, len(est.Scheduled))})
		infos[id] = gs.template
	}
	return options, infos, refused
}

// without removes the helped pods from the groups.
func without(groups []*estimator.Group, helped []*apiv1.Pod) []*estimator.Group {
	gone := make(map[*apiv1.Pod]bool, len(helped))
	for _, p := range helped {
		gone[p] = true
	}
	var out []*estimator.Group
	for _, g := range groups {
		var keep []*apiv1.Pod
		for _, p := range g.Pods {
			if !gone[p] {
				keep = append(keep, p)
			}
		}
		if len(keep) > 0 {
			out = append(out, &estimator.Group{Pods: keep, Interacting: g.Interacting})
		}
	}
	return out
}

// reportLimits counts a group skipped because a node of it would exceed
// --cores-total (cpu) or --memory-total (memory).
func (o *Orchestrator) reportLimits(cpu, memory bool) {
	if cpu {
		o.report.SkippedScaleUp(metrics.CPUResourceLimit)
	}
	if memory {
		o.report.SkippedScaleUp(metrics.MemoryResourceLimit)
	}
}

// exhausted reports whether the limits leave no room for a node.
func exhausted(l estimator.Limits) bool {
	return l.MaxNodes <= 0 || l.MaxMilliCPU < 0 || l.MaxMemoryBytes < 0
}
