package scaledown

import (
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
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
