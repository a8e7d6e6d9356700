package scaledown

import (
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Options are the flags scale-down follows; the builder maps them from
// config.Options (field names as there). The planner, the actuator and
// ScaleDown each read their own group.
type Options struct {
	// ScaleDown: whether it runs and its cool-downs.
	ScaleDownEnabled           bool
	ScaleDownDelayTypeLocal    bool
	ScaleDownDelayAfterAdd     time.Duration
	ScaleDownDelayAfterDelete  time.Duration
	ScaleDownDelayAfterFailure time.Duration

	// The planner.
	ScaleDownUnreadyEnabled           bool
	IgnoreMirrorPodsUtilization       bool
	ScaleDownNonEmptyCandidatesCount  int
	ScaleDownCandidatesPoolRatio      float64
	ScaleDownCandidatesPoolMinCount   int
	ScaleDownSimulationTimeout        time.Duration
	UnremovableNodeRecheckTimeout     time.Duration
	NodeDeletionCandidateTTL          time.Duration
	MaxNodeSkipEvalTimeTrackerEnabled bool
	// Cores, MemoryGiB (GiB) and GPUTotal: only their minimums bound
	// scale-down.
	Cores     config.Range
	MemoryGiB config.Range
	GPUTotal  []config.GPULimit
	// Taints say which taints keep a node counted as starting.
	Taints clusterstate.TaintOptions

	// The actuator.
	MaxScaleDownParallelism   int
	MaxDrainParallelism       int
	MaxGracefulTerminationSec int
	MaxPodEvictionTime        time.Duration
	NodeDeleteDelayAfterTaint time.Duration
	NodeDeletionDelayTimeout  time.Duration
	// NodeDeletionBatcherInterval gathers a group's deletions into one call.
	NodeDeletionBatcherInterval       time.Duration
	DaemonSetEvictionForEmptyNodes    bool
	DaemonSetEvictionForOccupiedNodes bool
	// DrainPriorityConfig is --drain-priority-config, checked by
	// config.Validate.
	DrainPriorityConfig string
}

// DefaultOptions are the options the flags' defaults give (what
// builder.ScaleDownOptions makes of config.Defaults(); a builder test
// keeps the two equal), for callers that set only what they change.
func DefaultOptions() Options {
	return Options{
		ScaleDownEnabled:                  true,
		ScaleDownDelayAfterAdd:            10 * time.Minute,
		ScaleDownDelayAfterFailure:        3 * time.Minute,
		ScaleDownUnreadyEnabled:           true,
		ScaleDownNonEmptyCandidatesCount:  30,
		ScaleDownCandidatesPoolRatio:      0.1,
		ScaleDownCandidatesPoolMinCount:   50,
		ScaleDownSimulationTimeout:        30 * time.Second,
		UnremovableNodeRecheckTimeout:     5 * time.Minute,
		Cores:                             config.Range{Max: config.DefaultMaxClusterCores},
		MemoryGiB:                         config.Range{Max: config.DefaultMaxClusterMemoryGiB},
		MaxScaleDownParallelism:           10,
		MaxDrainParallelism:               1,
		MaxGracefulTerminationSec:         600,
		MaxPodEvictionTime:                2 * time.Minute,
		NodeDeleteDelayAfterTaint:         5 * time.Second,
		NodeDeletionDelayTimeout:          2 * time.Minute,
		DaemonSetEvictionForOccupiedNodes: true,
	}
}
