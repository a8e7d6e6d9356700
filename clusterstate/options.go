package clusterstate

import (
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Options are the flags the registry follows; the builder maps them from
// config.Options (field names as there).
type Options struct {
	// Taints are the taint flags readiness reads.
	Taints TaintOptions
	// InitialNodeGroupBackoff, MaxNodeGroupBackoff and
	// NodeGroupBackoffResetTimeout shape a failing group's back-off.
	InitialNodeGroupBackoff      time.Duration
	MaxNodeGroupBackoff          time.Duration
	NodeGroupBackoffResetTimeout time.Duration
	// OkTotalUnreadyCount and MaxTotalUnreadyPercentage: the cluster is
	// healthy while its unready nodes are at most this many or this share.
	OkTotalUnreadyCount       int
	MaxTotalUnreadyPercentage float64
	// NodeGroupDefaults are the per-group options a group does not override
	// (provision and startup times among them).
	NodeGroupDefaults config.NodeGroupAutoscalingOptions
}

// TaintOptions are --startup-taint, --startup-taint-prefix, --status-taint
// and --ignore-taint.
type TaintOptions struct {
	StartupTaints        []string
	StartupTaintPrefixes []string
	StatusTaints         []string
	IgnoreTaints         []string
}

// DefaultOptions are the options the flags' defaults give (what
// builder.ClusterStateOptions makes of config.Defaults(); a builder test
// keeps the two equal), for callers that set only what they change.
func DefaultOptions() Options {
	return Options{
		InitialNodeGroupBackoff:      5 * time.Minute,
		MaxNodeGroupBackoff:          30 * time.Minute,
		NodeGroupBackoffResetTimeout: 3 * time.Hour,
		OkTotalUnreadyCount:          3,
		MaxTotalUnreadyPercentage:    45,
		NodeGroupDefaults:            config.Defaults().NodeGroupDefaults,
	}
}
