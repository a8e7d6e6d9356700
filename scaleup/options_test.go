package scaleup

import "k8s.io/autoscaler/cluster-autoscaler/config"

// testOptions are scale-up's options at the flags' defaults, mapped as
// builder.ScaleUpOptions maps them (no taint flag is set by default).
func testOptions() Options {
	d := config.Defaults()
	return Options{
		Expanders:                      d.Expanders,
		MaxNodesTotal:                  d.MaxNodesTotal,
		Cores:                          d.Cores,
		MemoryGiB:                      d.MemoryGiB,
		GPUTotal:                       d.GPUTotal,
		MaxNodesPerScaleUp:             d.MaxNodesPerScaleUp,
		MaxBinpackingTime:              d.MaxBinpackingTime,
		MaxNodeGroupBinpackingDuration: d.MaxNodeGroupBinpackingDuration,
		NodeInfoCacheExpireTime:        d.NodeInfoCacheExpireTime,
		ExpendablePodsPriorityCutoff:   d.ExpendablePodsPriorityCutoff,
		BalanceSimilarNodeGroups:       d.BalanceSimilarNodeGroups,
		BalancingLabels:                d.BalancingLabels,
		BalancingIgnoreLabels:          d.BalancingIgnoreLabels,
		MaxAllocatableDifferenceRatio:  d.MaxAllocatableDifferenceRatio,
		MaxFreeDifferenceRatio:         d.MaxFreeDifferenceRatio,
		MemoryDifferenceRatio:          d.MemoryDifferenceRatio,
		ForceDaemonSets:                d.ForceDaemonSets,
		ScaleFromUnschedulable:         d.ScaleFromUnschedulable,
	}
}
