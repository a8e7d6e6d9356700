package config

import "time"

// Cluster-wide resource defaults, as upstream: 5000 nodes of 64 cores and 20 GiB per core.
const (
	DefaultMaxClusterCores     = 5000 * 64
	DefaultMaxClusterMemoryGiB = 5000 * 64 * 20
)

// DefaultExplainAddress is --explain-address's default: loopback, so that
// /explainz is reached from outside the pod only through kubectl
// port-forward. 8087: 8085 is --address and 8086 the example external gRPC
// server's (hack/demo.sh runs both on one host).
const DefaultExplainAddress = "127.0.0.1:8087"

// Defaults returns the options an upstream cluster-autoscaler runs with when
// no flag is given. Every value matches upstream's documented default.
func Defaults() Options {
	return Options{
		Address: ":8085",
		// Node healing, off by default (not upstream).
		NodeHealingPolicies:            []string{"Ready=False:10m", "Ready=Unknown:10m"},
		MaxConcurrentHeals:             1,
		NodeHealingCooldown:            30 * time.Minute,
		NodeHealingMaxUnhealthyPercent: 40,
		NodeHealingReplaceFirst:        true,
		DisruptionSettleTime:           10 * time.Minute,
		NodeInfoCacheExpireTime:        87600 * time.Hour,
		Namespace:                      "kube-system",
		KubeClientQPS:                  5,
		KubeClientBurst:                10,
		KubeAPIContentType:             "application/vnd.kubernetes.protobuf",
		UserAgent:                      "cluster-autoscaler",
		LeaderElection: LeaderElection{
			Enabled:       true,
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
			ResourceLock:  "leases",
			ResourceName:  "cluster-autoscaler",
		},

		ScanInterval:         10 * time.Second,
		FrequentLoopsEnabled: true,
		ScaleUpBatchIdle:     time.Second,
		ScaleUpBatchMax:      10 * time.Second,
		GRPCExpanderTimeout:  5 * time.Second,
		MaxInactivity:        10 * time.Minute,
		MaxFailingTime:       15 * time.Minute,
		MaxStartupTime:       20 * time.Minute,
		HeapHeadroomRatio:    0.25,

		CloudProvider: "gce",
		Cores:         Range{Min: 0, Max: DefaultMaxClusterCores},
		MemoryGiB:     Range{Min: 0, Max: DefaultMaxClusterMemoryGiB},

		Expanders:                      []string{"least-waste"},
		MaxNodesPerScaleUp:             1000,
		MaxNodeGroupBinpackingDuration: 10 * time.Second,
		MaxBinpackingTime:              5 * time.Minute,
		PendingPodsBatchingTimeout:     4 * time.Minute,
		MaxAllocatableDifferenceRatio:  0.05,
		MaxFreeDifferenceRatio:         0.05,
		MemoryDifferenceRatio:          0.015,
		ExpendablePodsPriorityCutoff:   -10,
		ScaleUpFromZero:                true,
		ExplainEnabled:                 true,
		ExplainAddress:                 DefaultExplainAddress,
		InitialNodeGroupBackoff:        5 * time.Minute,
		MaxNodeGroupBackoff:            30 * time.Minute,
		NodeGroupBackoffResetTimeout:   3 * time.Hour,
		OkTotalUnreadyCount:            3,
		UnregisteredBreakerRatio:       0.5,
		UnregisteredBreakerMinimum:     2,
		MaxBrokenNodeDeletionsPerLoop:  20,
		MaxTotalUnreadyPercentage:      45,
		PredicateParallelism:           4,
		PodInjectionLimit:              5000,
		ProactiveScaleupEnabled:        true,

		// As long as a group's first back-off after running out of capacity.
		AWSInterruptedCapacityAvoidTime: 5 * time.Minute,
		AWSCapacityBlockDrainBefore:     10 * time.Minute,

		NodeGroupDefaults: NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold:    0.5,
			ScaleDownGPUUtilizationThreshold: 0.5,
			ScaleDownUnneededTime:            10 * time.Minute,
			ScaleDownUnreadyTime:             20 * time.Minute,
			MaxNodeProvisionTime:             15 * time.Minute,
			MaxNodeStartupTime:               15 * time.Minute,
		},

		ScaleDownEnabled:                   true,
		ScaleDownUnreadyEnabled:            true,
		ScaleDownDelayAfterAdd:             10 * time.Minute,
		ScaleDownDelayAfterFailure:         3 * time.Minute,
		MaxScaleDownParallelism:            10,
		MaxDrainParallelism:                1,
		MaxGracefulTerminationSec:          600,
		MaxPodEvictionTime:                 2 * time.Minute,
		NodeDeleteDelayAfterTaint:          5 * time.Second,
		SkipNodesWithSystemPods:            true,
		SkipNodesWithLocalStorage:          true,
		SkipNodesWithCustomControllerPods:  true,
		DaemonSetEvictionForOccupiedNodes:  true,
		CordonNodeBeforeTerminating:        true,
		ScaleDownNonEmptyCandidatesCount:   30,
		ScaleDownCandidatesPoolRatio:       0.1,
		ScaleDownCandidatesPoolMinCount:    50,
		ScaleDownSimulationTimeout:         30 * time.Second,
		UnremovableNodeRecheckTimeout:      5 * time.Minute,
		MaxBulkSoftTaintCount:              10,
		MaxBulkSoftTaintTime:               3 * time.Second,
		NodeDeletionDelayTimeout:           2 * time.Minute,
		BlockingSystemPodDisruptionTimeout: time.Hour,

		WriteStatusConfigMap: true,
		StatusConfigMapName:  "cluster-autoscaler-status",

		ProvReqInitialBackoff:           time.Minute,
		ProvReqMaxBackoff:               10 * time.Minute,
		ProvReqMaxBackoffCacheSize:      1000,
		CheckCapacityBatchTimebox:       10 * time.Second,
		CheckCapacityMaxBatchSize:       10,
		EnableDynamicResourceAllocation: true,
		ProvReqBookingTime:              10 * time.Minute,
		ProvReqTemplateGracePeriod:      time.Minute,
		ProvReqExpiryTime:               7 * 24 * time.Hour,
		ProvReqRetentionTime:            7 * 24 * time.Hour,
		ProvReqMaxPods:                  50000,
		ProvReqMaxRunGrace:              10 * time.Minute,
		CapacityBufferPodDryRunEnabled:  true,
		Disruption: Disruption{
			ConsolidationMinSavingRatio:         0.1,
			ConsolidationMaxNodesPerReplacement: 10,
			ConsolidationMaxReplacementsPerLoop: 10,
			ConsolidationMaxSimulationsPerLoop:  1000,
			ConsolidationSimulationTimeout:      5 * time.Second,
		},
	}
}
