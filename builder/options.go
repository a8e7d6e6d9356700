package builder

import (
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// The mappings below are the one place where the flags (config.Options)
// become each package's own options: a package reads only what its
// Options struct names.

// ClusterStateOptions are the cluster state registry's flags.
func ClusterStateOptions(o config.Options) clusterstate.Options {
	return clusterstate.Options{
		Taints:                       TaintOptions(o),
		InitialNodeGroupBackoff:      o.InitialNodeGroupBackoff,
		MaxNodeGroupBackoff:          o.MaxNodeGroupBackoff,
		NodeGroupBackoffResetTimeout: o.NodeGroupBackoffResetTimeout,
		OkTotalUnreadyCount:          o.OkTotalUnreadyCount,
		MaxTotalUnreadyPercentage:    o.MaxTotalUnreadyPercentage,
		NodeGroupDefaults:            o.NodeGroupDefaults,
	}
}

// TaintOptions are the taint flags readiness follows.
func TaintOptions(o config.Options) clusterstate.TaintOptions {
	return clusterstate.TaintOptions{
		StartupTaints:        o.StartupTaints,
		StartupTaintPrefixes: o.StartupTaintPrefixes,
		StatusTaints:         o.StatusTaints,
		IgnoreTaints:         o.IgnoreTaints,
	}
}
