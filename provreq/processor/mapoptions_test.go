package processor

import (
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// stateOptions maps the flags to the cluster state registry's options as
// builder.ClusterStateOptions does.
func stateOptions(o config.Options) clusterstate.Options {
	return clusterstate.Options{
		Taints: clusterstate.TaintOptions{StartupTaints: o.StartupTaints, StartupTaintPrefixes: o.StartupTaintPrefixes,
			StatusTaints: o.StatusTaints, IgnoreTaints: o.IgnoreTaints},
		InitialNodeGroupBackoff:      o.InitialNodeGroupBackoff,
		MaxNodeGroupBackoff:          o.MaxNodeGroupBackoff,
		NodeGroupBackoffResetTimeout: o.NodeGroupBackoffResetTimeout,
		OkTotalUnreadyCount:          o.OkTotalUnreadyCount,
		MaxTotalUnreadyPercentage:    o.MaxTotalUnreadyPercentage,
		NodeGroupDefaults:            o.NodeGroupDefaults,
	}
}

// scaleUpOptions maps the flags to scale-up's options as
// builder.ScaleUpOptions does.
func scaleUpOptions(o config.Options) scaleup.Options {
	return scaleup.Options{
		Expanders:                      o.Expanders,
		MaxNodesTotal:                  o.MaxNodesTotal,
		Cores:                          o.Cores,
		MemoryGiB:                      o.MemoryGiB,
		GPUTotal:                       o.GPUTotal,
		MaxNodesPerScaleUp:             o.MaxNodesPerScaleUp,
		MaxBinpackingTime:              o.MaxBinpackingTime,
		MaxNodeGroupBinpackingDuration: o.MaxNodeGroupBinpackingDuration,
		NodeInfoCacheExpireTime:        o.NodeInfoCacheExpireTime,
		ExpendablePodsPriorityCutoff:   o.ExpendablePodsPriorityCutoff,
		BalanceSimilarNodeGroups:       o.BalanceSimilarNodeGroups,
		BalancingLabels:                o.BalancingLabels,
		BalancingIgnoreLabels:          o.BalancingIgnoreLabels,
		MaxAllocatableDifferenceRatio:  o.MaxAllocatableDifferenceRatio,
		MaxFreeDifferenceRatio:         o.MaxFreeDifferenceRatio,
		MemoryDifferenceRatio:          o.MemoryDifferenceRatio,
		ForceDaemonSets:                o.ForceDaemonSets,
		ScaleFromUnschedulable:         o.ScaleFromUnschedulable,
		Taints:                         stateOptions(o).Taints,
	}
}
