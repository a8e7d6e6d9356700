package expander

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// leastWaste keeps the options that leave the smallest share of the added
// capacity idle. For an option adding n nodes of capacity (C cpu, M memory)
// for pods requesting (c, m) in total:
//
//	score = (n·C − c)/(n·C) + (n·M − m)/(n·M)
//
// The node is the group's template, by capacity (not allocatable), and the
// pods' requests are their effective requests (see podRequest). Options
// without a template, adding no node, or whose template has no cpu or memory
// capacity are skipped. The lowest score wins; ties are kept.
type leastWaste struct{}

var _ Filter = leastWaste{}

// BestOptions implements Filter.
func (leastWaste) BestOptions(ctx context.Context, options []Option, nodeInfos map[string]*cloudprovider.NodeInfo) []Option {
	logger := klog.FromContext(ctx).V(4)
	return keepLowest(options, func(o Option) (float64, bool) {
		id := groupID(o)
		info := nodeInfos[id]
		if info == nil || info.Node == nil {
			logger.Info("Expander skipped option without a template node", "expander", "least-waste", "nodeGroup", id)
			return 0, false
		}
		capacity := info.Node.Status.Capacity
		availCPU := float64(amount(capacity, apiv1.ResourceCPU)) * float64(o.NodeCount)
		availMem := float64(amount(capacity, apiv1.ResourceMemory)) * float64(o.NodeCount)
		if availCPU <= 0 || availMem <= 0 {
			logger.Info("Expander skipped option without capacity", "expander", "least-waste", "nodeGroup", id,
				"nodeCount", o.NodeCount, "node", klog.KObj(info.Node))
			return 0, false
		}
		wastedCPU := (availCPU - float64(podsRequest(o.Pods, apiv1.ResourceCPU))) / availCPU
		wastedMem := (availMem - float64(podsRequest(o.Pods, apiv1.ResourceMemory))) / availMem
		score := wastedCPU + wastedMem
		logger.Info("Expander scored option", "expander", "least-waste", "nodeGroup", id, "nodeCount", o.NodeCount,
			"wastedCPU", wastedCPU, "wastedMemory", wastedMem, "score", score)
		return score, true
	})
}
