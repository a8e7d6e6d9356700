package core

import (
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// testOptions are the loop's options at the flags' defaults, mapped as
// builder.CoreOptions maps them (no taint flag is set by default).
func testOptions() Options {
	d := config.Defaults()
	return Options{
		ClusterState: clusterstate.Options{
			InitialNodeGroupBackoff:      d.InitialNodeGroupBackoff,
			MaxNodeGroupBackoff:          d.MaxNodeGroupBackoff,
			NodeGroupBackoffResetTimeout: d.NodeGroupBackoffResetTimeout,
			OkTotalUnreadyCount:          d.OkTotalUnreadyCount,
			MaxTotalUnreadyPercentage:    d.MaxTotalUnreadyPercentage,
			NodeGroupDefaults:            d.NodeGroupDefaults,
		},
		ScaleUpFromZero:         d.ScaleUpFromZero,
		EnforceNodeGroupMinSize: d.EnforceNodeGroupMinSize,
		ScaleDownEnabled:        d.ScaleDownEnabled,
		EmitPerNodeGroupMetrics: d.EmitPerNodeGroupMetrics,
		BypassedSchedulerNames:  d.BypassedSchedulerNames,
		MaxNodesTotal:           d.MaxNodesTotal,
		Cores:                   d.Cores,
		MemoryGiB:               d.MemoryGiB,
	}
}
