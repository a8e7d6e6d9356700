package core

import (
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Options are the flags the loop itself follows; the builder maps them
// from config.Options (field names as there).
type Options struct {
	// ClusterState are the registry's options: the loop reads their
	// unready limits, taint flags and per-group defaults, and builds its
	// own registry from them when none is shared (WithClusterState).
	ClusterState clusterstate.Options
	// ScaleUpFromZero lets the loop scale while no node is ready.
	ScaleUpFromZero bool
	// EnforceNodeGroupMinSize raises groups below their minimum size.
	EnforceNodeGroupMinSize bool
	// ScaleDownEnabled: scale-down runs (and reports) at all.
	ScaleDownEnabled bool
	// EmitPerNodeGroupMetrics reports each group's sizes.
	EmitPerNodeGroupMetrics bool
	// BypassedSchedulerNames: pending pods of these schedulers count as
	// unschedulable without waiting for the scheduler's verdict.
	BypassedSchedulerNames []string
	// MaxNodesTotal, Cores and MemoryGiB (GiB) are reported as the
	// cluster's limits.
	MaxNodesTotal int
	Cores         config.Range
	MemoryGiB     config.Range
}

// DefaultOptions are the options the flags' defaults give (what
// builder.CoreOptions makes of config.Defaults(); a builder test keeps the
// two equal), for callers that set only what they change.
func DefaultOptions() Options {
	return Options{
		ClusterState:     clusterstate.DefaultOptions(),
		ScaleUpFromZero:  true,
		ScaleDownEnabled: true,
		Cores:            config.Range{Max: config.DefaultMaxClusterCores},
		MemoryGiB:        config.Range{Max: config.DefaultMaxClusterMemoryGiB},
	}
}
