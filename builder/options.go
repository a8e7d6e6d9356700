package builder

import (
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
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

// ScaleDownOptions are the planner's, the actuator's and ScaleDown's
// flags. (The soft-taint limits, cordoning and the dynamic delete delay
// are the builder's: they choose what NewScaleDown wires.)
func ScaleDownOptions(o config.Options) scaledown.Options {
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
		Taints:                            TaintOptions(o),
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

// DrainOptions are the drainability rules' flags; the grace cap is the
// longest grace period the actuator gives (see maxGraceSec).
func DrainOptions(o config.Options) drain.Options {
	return drain.Options{
		SkipNodesWithSystemPods:            o.SkipNodesWithSystemPods,
		SkipNodesWithLocalStorage:          o.SkipNodesWithLocalStorage,
		SkipNodesWithCustomControllerPods:  o.SkipNodesWithCustomControllerPods,
		MinReplicaCount:                    o.MinReplicaCount,
		BlockingSystemPodDisruptionTimeout: o.BlockingSystemPodDisruptionTimeout,
		MaxGracefulTerminationSec:          maxGraceSec(o),
	}
}

// ScaleUpOptions are the orchestrator's flags. (The simulator's, the
// expanders' and the capacity quotas' are the builder's: they choose what
// NewScaleUp wires.)
func ScaleUpOptions(o config.Options) scaleup.Options {
	return scaleup.Options{
		Expanders:                             o.Expanders,
		MaxNodesTotal:                         o.MaxNodesTotal,
		Cores:                                 o.Cores,
		MemoryGiB:                             o.MemoryGiB,
		GPUTotal:                              o.GPUTotal,
		MaxNodesPerScaleUp:                    o.MaxNodesPerScaleUp,
		MaxBinpackingTime:                     o.MaxBinpackingTime,
		MaxNodeGroupBinpackingDuration:        o.MaxNodeGroupBinpackingDuration,
		EnableGracefulDegradation:             o.EnableGracefulDegradation,
		PendingPodsBatchingTimeout:            o.PendingPodsBatchingTimeout,
		ScaleUpSimulationForSkippedNodeGroups: o.ScaleUpSimulationForSkippedNodeGroups,
		NodeInfoCacheExpireTime:               o.NodeInfoCacheExpireTime,
		ExpendablePodsPriorityCutoff:          o.ExpendablePodsPriorityCutoff,
		BalanceSimilarNodeGroups:              o.BalanceSimilarNodeGroups,
		BalancingLabels:                       o.BalancingLabels,
		BalancingIgnoreLabels:                 o.BalancingIgnoreLabels,
		MaxAllocatableDifferenceRatio:         o.MaxAllocatableDifferenceRatio,
		MaxFreeDifferenceRatio:                o.MaxFreeDifferenceRatio,
		MemoryDifferenceRatio:                 o.MemoryDifferenceRatio,
		ForceDaemonSets:                       o.ForceDaemonSets,
		ScaleFromUnschedulable:                o.ScaleFromUnschedulable,
		Taints:                                TaintOptions(o),
	}
}

// CoreOptions are the loop's own flags.
func CoreOptions(o config.Options) core.Options {
	return core.Options{
		ClusterState:            ClusterStateOptions(o),
		ScaleUpFromZero:         o.ScaleUpFromZero,
		EnforceNodeGroupMinSize: o.EnforceNodeGroupMinSize,
		ScaleDownEnabled:        o.ScaleDownEnabled,
		EmitPerNodeGroupMetrics: o.EmitPerNodeGroupMetrics,
		BypassedSchedulerNames:  o.BypassedSchedulerNames,
		MaxNodesTotal:           o.MaxNodesTotal,
		Cores:                   o.Cores,
		MemoryGiB:               o.MemoryGiB,
	}
}

// ProviderOptions are the flags a cloud provider may read to build itself.
func ProviderOptions(o config.Options) cloudprovider.Options {
	return cloudprovider.Options{
		CloudConfig:                        o.CloudConfig,
		NodeGroups:                         o.NodeGroups,
		NodeGroupAutoDiscovery:             o.NodeGroupAutoDiscovery,
		Namespace:                          o.Namespace,
		Kubeconfig:                         o.Kubeconfig,
		KubernetesURL:                      o.KubernetesURL,
		KubeClientQPS:                      o.KubeClientQPS,
		KubeClientBurst:                    o.KubeClientBurst,
		UserAgent:                          o.UserAgent,
		ClusterAPICloudConfigAuthoritative: o.ClusterAPICloudConfigAuthoritative,
		KwokProviderEnabled:                o.KwokProviderEnabled,
		AWSInterruptionQueue:               o.AWSInterruptionQueue,
		AWSInterruptionRebalance:           o.AWSInterruptionRebalance,
		AWSInterruptedCapacityAvoidTime:    o.AWSInterruptedCapacityAvoidTime,
		AWSCapacityBlockDrainBefore:        o.AWSCapacityBlockDrainBefore,
	}
}

// ResourceLimiter holds the limits of --cores-total, --memory-total (GiB,
// converted to bytes) and --gpu-total.
func ResourceLimiter(o config.Options) *cloudprovider.ResourceLimiter {
	min := map[string]int64{cloudprovider.ResourceNameCores: o.Cores.Min, cloudprovider.ResourceNameMemory: o.MemoryGiB.Min << 30}
	max := map[string]int64{cloudprovider.ResourceNameCores: o.Cores.Max, cloudprovider.ResourceNameMemory: o.MemoryGiB.Max << 30}
	for _, g := range o.GPUTotal {
		min[g.Type], max[g.Type] = g.Min, g.Max
	}
	return cloudprovider.NewResourceLimiter(min, max)
}
