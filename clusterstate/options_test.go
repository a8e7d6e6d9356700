package clusterstate

import "k8s.io/autoscaler/cluster-autoscaler/config"

// testOptions are the registry's options at the flags' defaults, mapped as
// builder.ClusterStateOptions maps them (no taint flag is set by default).
func testOptions() Options {
	d := config.Defaults()
	return Options{
		InitialNodeGroupBackoff:      d.InitialNodeGroupBackoff,
		MaxNodeGroupBackoff:          d.MaxNodeGroupBackoff,
		NodeGroupBackoffResetTimeout: d.NodeGroupBackoffResetTimeout,
		OkTotalUnreadyCount:          d.OkTotalUnreadyCount,
		MaxTotalUnreadyPercentage:    d.MaxTotalUnreadyPercentage,
		NodeGroupDefaults:            d.NodeGroupDefaults,
	}
}
