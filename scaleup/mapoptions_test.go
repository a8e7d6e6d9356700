package scaleup

import (
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
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

// scaleDownOptions maps the flags to scale-down's options as
// builder.ScaleDownOptions does.
func scaleDownOptions(o config.Options) scaledown.Options {
	return scaledown.Options{
		ScaleDownEnabled:                  o.ScaleDownEnabled,
		ScaleDownDelayTypeLocal:           o.ScaleDownDelayTypeLocal,
		ScaleDownDelayAfterAdd:            o.ScaleDownDelayAfterAdd,
		ScaleDownDelayAfterDelete:         o.ScaleDownDelayAfterDelete,
		ScaleDownDelayAfterFailure:        o.ScaleDownDelayAfterFailure,
		ScaleDownUnreadyEnabled:           o.ScaleDownUnreadyEnabled,
		IgnoreMirrorPodsUtilization:       o.IgnoreMirrorPodsUtilization,
		ScaleDownNonEmptyCandidatesCount:  o.ScaleDownNonEmptyCandidatesCount,
		ScaleDownCandidatesPoolRatio:      o.ScaleDownCandidatesPoolRatio,
		ScaleDownCandidatesPoolMinCount:   o.ScaleDownCandidatesPoolMinCount,
		ScaleDownSimulationTimeout:        o.ScaleDownSimulationTimeout,
		UnremovableNodeRecheckTimeout:     o.UnremovableNodeRecheckTimeout,
		NodeDeletionCandidateTTL:          o.NodeDeletionCandidateTTL,
		MaxNodeSkipEvalTimeTrackerEnabled: o.MaxNodeSkipEvalTimeTrackerEnabled,
		Cores:                             o.Cores,
		MemoryGiB:                         o.MemoryGiB,
		GPUTotal:                          o.GPUTotal,
		Taints:                            stateOptions(o).Taints,
		MaxScaleDownParallelism:           o.MaxScaleDownParallelism,
		MaxDrainParallelism:               o.MaxDrainParallelism,
		MaxGracefulTerminationSec:         o.MaxGracefulTerminationSec,
		MaxPodEvictionTime:                o.MaxPodEvictionTime,
		NodeDeleteDelayAfterTaint:         o.NodeDeleteDelayAfterTaint,
		NodeDeletionDelayTimeout:          o.NodeDeletionDelayTimeout,
		NodeDeletionBatcherInterval:       o.NodeDeletionBatcherInterval,
		DaemonSetEvictionForEmptyNodes:    o.DaemonSetEvictionForEmptyNodes,
		DaemonSetEvictionForOccupiedNodes: o.DaemonSetEvictionForOccupiedNodes,
		DrainPriorityConfig:               o.DrainPriorityConfig,
	}
}
