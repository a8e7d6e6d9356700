package scaleup

import (
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Options are the flags scale-up follows; the builder maps them from
// config.Options (field names as there).
type Options struct {
	// Expanders name the expander chain, for the explainer's verdicts (the
	// chain itself is built by the builder).
	Expanders []string
	// Cluster-wide limits: --max-nodes-total, --cores-total,
	// --memory-total (GiB) and --gpu-total; only maximums bound scale-up.
	MaxNodesTotal int
	Cores         config.Range
	MemoryGiB     config.Range
	GPUTotal      []config.GPULimit
	// MaxNodesPerScaleUp caps one group's increase in one loop.
	MaxNodesPerScaleUp int
	// MaxBinpackingTime bounds a loop's estimates, and
	// MaxNodeGroupBinpackingDuration one group's.
	MaxBinpackingTime              time.Duration
	MaxNodeGroupBinpackingDuration time.Duration
	// With EnableGracefulDegradation (--enable-graceful-degradation), the check
	// of pending pods against existing and upcoming nodes stops after
	// PendingPodsBatchingTimeout (--pending-pods-batching-timeout): the
	// equivalence groups it did not reach are skipped in this loop (not
	// scaled up for), counted in Result.Skipped.
	EnableGracefulDegradation  bool
	PendingPodsBatchingTimeout time.Duration
	// ScaleUpSimulationForSkippedNodeGroups (--scaleup-simulation-for-skipped-node-groups-enabled):
	// the pods a scale-up leaves are checked against the templates of the
	// node groups skipped in the loop, so that their reasons (events, the
	// explainer) tell a skipped group that would not take them anyway; the
	// check is timed as function_duration_seconds{function="scaleUp:skippedNodeGroupsSimulation"}.
	ScaleUpSimulationForSkippedNodeGroups bool
	// NodeInfoCacheExpireTime: how long a template made from a group's
	// node stands in for the group without a ready node.
	NodeInfoCacheExpireTime time.Duration
	// ExpendablePodsPriorityCutoff: pods below this priority trigger no
	// scale-up.
	ExpendablePodsPriorityCutoff int
	// Balancing similar node groups.
	BalanceSimilarNodeGroups      bool
	BalancingLabels               []string
	BalancingIgnoreLabels         []string
	MaxAllocatableDifferenceRatio float64
	MaxFreeDifferenceRatio        float64
	MemoryDifferenceRatio         float64
	// Templates: ForceDaemonSets adds every DaemonSet's pod,
	// ScaleFromUnschedulable ignores spec.unschedulable of provider
	// templates, and the taint flags say which taints are dropped.
	ForceDaemonSets        bool
	ScaleFromUnschedulable bool
	Taints                 clusterstate.TaintOptions
}

// DefaultOptions are the options the flags' defaults give (what
// builder.ScaleUpOptions makes of config.Defaults(); a builder test keeps
// the two equal), for callers that set only what they change.
func DefaultOptions() Options {
	return Options{
		Expanders:                      []string{"least-waste"},
		Cores:                          config.Range{Max: config.DefaultMaxClusterCores},
		MemoryGiB:                      config.Range{Max: config.DefaultMaxClusterMemoryGiB},
		MaxNodesPerScaleUp:             1000,
		MaxBinpackingTime:              5 * time.Minute,
		MaxNodeGroupBinpackingDuration: 10 * time.Second,
		PendingPodsBatchingTimeout:     4 * time.Minute,
		NodeInfoCacheExpireTime:        87600 * time.Hour,
		ExpendablePodsPriorityCutoff:   -10,
		MaxAllocatableDifferenceRatio:  0.05,
		MaxFreeDifferenceRatio:         0.05,
		MemoryDifferenceRatio:          0.015,
	}
}
