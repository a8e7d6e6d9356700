package scaledown

import "k8s.io/autoscaler/cluster-autoscaler/config"

// testOptions are scale-down's options at the flags' defaults, mapped as
// builder.ScaleDownOptions maps them (no taint flag is set by default).
func testOptions() Options {
	d := config.Defaults()
	return Options{
		ScaleDownEnabled:                  d.ScaleDownEnabled,
		ScaleDownDelayTypeLocal:           d.ScaleDownDelayTypeLocal,
		ScaleDownDelayAfterAdd:            d.ScaleDownDelayAfterAdd,
		ScaleDownDelayAfterDelete:         d.ScaleDownDelayAfterDelete,
		ScaleDownDelayAfterFailure:        d.ScaleDownDelayAfterFailure,
		ScaleDownUnreadyEnabled:           d.ScaleDownUnreadyEnabled,
		IgnoreMirrorPodsUtilization:       d.IgnoreMirrorPodsUtilization,
		ScaleDownNonEmptyCandidatesCount:  d.ScaleDownNonEmptyCandidatesCount,
		ScaleDownCandidatesPoolRatio:      d.ScaleDownCandidatesPoolRatio,
		ScaleDownCandidatesPoolMinCount:   d.ScaleDownCandidatesPoolMinCount,
		ScaleDownSimulationTimeout:        d.ScaleDownSimulationTimeout,
		UnremovableNodeRecheckTimeout:     d.UnremovableNodeRecheckTimeout,
		NodeDeletionCandidateTTL:          d.NodeDeletionCandidateTTL,
		MaxNodeSkipEvalTimeTrackerEnabled: d.MaxNodeSkipEvalTimeTrackerEnabled,
		Cores:                             d.Cores,
		MemoryGiB:                         d.MemoryGiB,
		GPUTotal:                          d.GPUTotal,
		MaxScaleDownParallelism:           d.MaxScaleDownParallelism,
		MaxDrainParallelism:               d.MaxDrainParallelism,
		MaxGracefulTerminationSec:         d.MaxGracefulTerminationSec,
		MaxPodEvictionTime:                d.MaxPodEvictionTime,
		NodeDeleteDelayAfterTaint:         d.NodeDeleteDelayAfterTaint,
		NodeDeletionDelayTimeout:          d.NodeDeletionDelayTimeout,
		NodeDeletionBatcherInterval:       d.NodeDeletionBatcherInterval,
		DaemonSetEvictionForEmptyNodes:    d.DaemonSetEvictionForEmptyNodes,
		DaemonSetEvictionForOccupiedNodes: d.DaemonSetEvictionForOccupiedNodes,
		DrainPriorityConfig:               d.DrainPriorityConfig,
	}
}
