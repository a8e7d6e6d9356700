package config

import "time"

// Options is everything the command line can set. Field groups follow the
// loop: process wiring, the loop itself, cloud and limits, scale-up,
// per-node-group defaults, scale-down, status and ProvisioningRequests.
type Options struct {
	// Process wiring.
	Address            string
	Namespace          string
	Kubeconfig         string
	KubernetesURL      string
	KubeClientQPS      float64
	KubeClientBurst    int
	KubeAPIContentType string
	UserAgent          string
	Profiling          bool
	ClusterName        string
	LeaderElection     LeaderElection

	// The loop.
	ScanInterval         time.Duration
	FrequentLoopsEnabled bool
	// The batching window of loops asked for by new unschedulable pods
	// (not upstream): the loop starts once no new pod arrived for
	// ScaleUpBatchIdle, or ScaleUpBatchMax after the first one.
	ScaleUpBatchIdle time.Duration
	ScaleUpBatchMax  time.Duration
	MaxInactivity    time.Duration
	MaxFailingTime   time.Duration
	MaxStartupTime   time.Duration
	// HeapHeadroomRatio bounds the Go heap's growth past its live part
	// (not upstream; 0: Go's GOGC alone). See heapgovernor/.
	HeapHeadroomRatio float64

	// Cloud provider and cluster-wide limits.
	CloudProvider          string
	CloudConfig            string
	NodeGroups             []string // raw --nodes values, <min>:<max>:<rest>
	NodeGroupAutoDiscovery []string
	MaxNodesTotal          int
	Cores                  Range // cores
	MemoryGiB              Range // GiB, as on the command line
	GPUTotal               []GPULimit

	// ClusterAPICloudConfigAuthoritative: the clusterapi provider never
	// falls back from an empty CloudConfig to the kubeconfig of the
	// autoscaled cluster; the management cluster is then the in-cluster one.
	ClusterAPICloudConfigAuthoritative bool
	// KwokProviderEnabled opts the kwok provider into the cluster it runs
	// against without the ConfigMap kwok-provider-config (not upstream).
	KwokProviderEnabled bool
	// AWSInterruptionQueue is the SQS queue (URL or name) the aws provider
	// reads EventBridge interruption notices from; empty: none (not
	// upstream). AWSInterruptionRebalance also acts on rebalance
	// recommendations.
	AWSInterruptionQueue     string
	AWSInterruptionRebalance bool
	// AWSInterruptedCapacityAvoidTime is how long the Spot offering (group,
	// instance type, zone) of an interrupted instance counts as out of
	// capacity; 0: never (not upstream).
	AWSInterruptedCapacityAvoidTime time.Duration
	// AWSCapacityBlockDrainBefore is how long before an EC2 Capacity
	// Block's end its nodes are drained (disruption reason
	// reservationending) and its group stops scaling up; 0: off.
	AWSCapacityBlockDrainBefore time.Duration

	// Node healing (package healing); not upstream.
	NodeHealingEnabled             bool
	NodeHealingPolicies            []string // <ConditionType>=<Status>:<duration>
	NodeHealingHooksConfig         string
	MaxConcurrentHeals             int
	NodeHealingCooldown            time.Duration
	NodeHealingMaxUnhealthyPercent float64
	NodeHealingDryRun              bool
	NodeHealingReplaceFirst        bool
	// DisruptionSettleTime: nodes younger than this are kept from the
	// voluntary disruption reasons (package disruption); not upstream.
	DisruptionSettleTime time.Duration

	// NodeInfoCacheExpireTime: a template made from a group's node stands in
	// for the group while it has no ready node for at most this long.
	NodeInfoCacheExpireTime time.Duration

	// ScaleFromUnschedulable ignores spec.unschedulable of provider templates.
	ScaleFromUnschedulable bool

	// DebuggingSnapshotEnabled serves /snapshotz: the next loop's
	// observation as JSON.
	DebuggingSnapshotEnabled bool

	// ExplainEnabled serves /explainz: every loop keeps, for each pending
	// pod group, each node group's verdict, and each node's scale-down
	// verdict (last loop only, bounded).
	ExplainEnabled bool
	// ExplainAddress is the listener of its own that serves /explainz,
	// loopback by default so that reaching it from outside the pod takes
	// `kubectl port-forward` (the pods/portforward permission); "" for none.
	ExplainAddress string
	// ExplainOnMetricsPort serves /explainz on Address too, unauthenticated,
	// to whoever reaches that port (the chart's Service: the whole cluster).
	ExplainOnMetricsPort bool

	// Scale-up.
	Expanders        []string
	GRPCExpanderURL  string
	GRPCExpanderCert string
	// GRPCExpanderTimeout bounds one call to the grpc expander (not upstream,
	// which has a fixed 5 s).
	GRPCExpanderTimeout            time.Duration
	MaxNodesPerScaleUp             int
	MaxNodeGroupBinpackingDuration time.Duration
	MaxBinpackingTime              time.Duration
	NewPodScaleUpDelay             time.Duration
	BalanceSimilarNodeGroups       bool
	BalancingLabels                []string
	BalancingIgnoreLabels          []string
	MaxAllocatableDifferenceRatio  float64
	MaxFreeDifferenceRatio         float64
	MemoryDifferenceRatio          float64
	ExpendablePodsPriorityCutoff   int
	EnforceNodeGroupMinSize        bool
	ScaleUpFromZero                bool
	InitialNodeGroupBackoff        time.Duration
	MaxNodeGroupBackoff            time.Duration
	NodeGroupBackoffResetTimeout   time.Duration
	OkTotalUnreadyCount            int
	MaxTotalUnreadyPercentage      float64
	StartupTaints                  []string
	StartupTaintPrefixes           []string
	StatusTaints                   []string
	IgnoreTaints                   []string
	AllowedSchedulerNames          []string
	PodInjectionLimit              int
	ForceDaemonSets                bool
	BypassedSchedulerNames         []string
	SchedulerConfigFile            string
	PredicateParallelism           int
	// ProactiveScaleupEnabled counts the replicas a ReplicaSet has not
	// created yet as pending: stand-ins, and the room earlier pieces made
	// for them (--enable-proactive-scaleup; on by default here, off
	// upstream).
	ProactiveScaleupEnabled bool
	// CapacityQuotasEnabled makes scale-up respect CapacityQuota objects.
	CapacityQuotasEnabled bool
	// PendingPodsBatchingTimeout bounds, with EnableGracefulDegradation,
	// the check of pending pods against existing and upcoming nodes
	// (upstream's filter-out-schedulable): the equivalence groups not
	// reached within it are skipped in the loop.
	PendingPodsBatchingTimeout time.Duration
	EnableGracefulDegradation  bool
	// ScaleUpSimulationForSkippedNodeGroups checks the pods a scale-up
	// leaves against the templates of the node groups it skipped, for
	// reporting only (--scaleup-simulation-for-skipped-node-groups-enabled).
	ScaleUpSimulationForSkippedNodeGroups bool
	// SchedulerVerbosity caps the verbosity of the scheduler framework's
	// logs (--scheduler-verbosity).
	SchedulerVerbosity            int
	DryRunDeletions               bool
	UnregisteredBreakerRatio      float64
	UnregisteredBreakerMinimum    int
	MaxBrokenNodeDeletionsPerLoop int
	ForceDeleteUnregisteredNodes  bool
	ForceDeleteFailedNodes        bool

	// NodeGroupDefaults are the per-node-group options a provider may override.
	NodeGroupDefaults NodeGroupAutoscalingOptions

	// Scale-down.
	ScaleDownEnabled            bool
	ScaleDownUnreadyEnabled     bool
	ScaleDownDelayAfterAdd      time.Duration
	ScaleDownDelayAfterDelete   time.Duration
	ScaleDownDelayAfterFailure  time.Duration
	ScaleDownDelayTypeLocal     bool
	IgnoreMirrorPodsUtilization bool
	MaxScaleDownParallelism     int
	MaxDrainParallelism         int
	MaxGracefulTerminationSec   int
	MaxPodEvictionTime          time.Duration
	NodeDeleteDelayAfterTaint   time.Duration
	// DynamicNodeDeleteDelayAfterTaint replaces NodeDeleteDelayAfterTaint
	// by twice the longest taint propagation seen in the last hour.
	DynamicNodeDeleteDelayAfterTaint   bool
	SkipNodesWithSystemPods            bool
	SkipNodesWithLocalStorage          bool
	SkipNodesWithCustomControllerPods  bool
	MinReplicaCount                    int
	DaemonSetEvictionForEmptyNodes     bool
	DaemonSetEvictionForOccupiedNodes  bool
	CordonNodeBeforeTerminating        bool
	ScaleDownNonEmptyCandidatesCount   int
	ScaleDownCandidatesPoolRatio       float64
	ScaleDownCandidatesPoolMinCount    int
	ScaleDownSimulationTimeout         time.Duration
	UnremovableNodeRecheckTimeout      time.Duration
	MaxBulkSoftTaintCount              int
	MaxBulkSoftTaintTime               time.Duration
	NodeDeletionDelayTimeout           time.Duration
	NodeDeletionBatcherInterval        time.Duration
	NodeDeletionCandidateTTL           time.Duration
	BlockingSystemPodDisruptionTimeout time.Duration
	DrainPriorityConfig                string
	MaxNodeSkipEvalTimeTrackerEnabled  bool

	// Status reporting.
	WriteStatusConfigMap    bool
	StatusConfigMapName     string
	EmitPerNodeGroupMetrics bool
	RecordDuplicatedEvents  bool

	// ProvisioningRequests.
	EnableProvisioningRequests      bool
	ProvReqInitialBackoff           time.Duration
	ProvReqMaxBackoff               time.Duration
	ProvReqMaxBackoffCacheSize      int
	CheckCapacityBatchProcessing    bool
	CheckCapacityBatchTimebox       time.Duration
	CheckCapacityMaxBatchSize       int
	CheckCapacityProcessorInstance  string
	EnableDynamicResourceAllocation bool
	// Our own, beyond upstream's hard-coded values.
	ProvReqBookingTime         time.Duration
	ProvReqTemplateGracePeriod time.Duration
	ProvReqExpiryTime          time.Duration
	ProvReqRetentionTime       time.Duration
	// ProvReqMaxPods caps the pods one ProvisioningRequest may ask for.
	ProvReqMaxPods int
	// ProvReqMaxRunGrace is how long the nodes of a request whose
	// maxRunDurationSeconds passed wait for its pods to go before the
	// disruption engine drains them all the same.
	ProvReqMaxRunGrace time.Duration

	// CapacityBuffers.
	CapacityBufferControllerEnabled   bool
	CapacityBufferPodInjectionEnabled bool
	CapacityBufferPodDryRunEnabled    bool
	// CapacityBufferReadyReplicasEnabled writes each buffer's
	// status.readyReplicas from the loop; it needs the pod injection.
	CapacityBufferReadyReplicasEnabled bool

	// Disruption (package disruption and its sources; issue 40): all off
	// by default. Not upstream.
	Disruption Disruption
}

// Disruption configures the reasons the disruption engine replaces nodes
// for, besides healing: consolidation, drift and expiry, and the budgets.
type Disruption struct {
	// Budgets are --disruption-budget's values (disruption/budget's syntax,
	// parsed by the builder).
	Budgets []string
	// DriftEnabled replaces nodes whose group's template changed.
	DriftEnabled bool
	// MaxNodeLifetime replaces nodes older than this (0: never).
	MaxNodeLifetime time.Duration
	// Consolidation: the planner's switch and settings
	// (disruption/consolidation.Options).
	ConsolidationEnabled                bool
	ConsolidationMinSavingRatio         float64
	ConsolidationMinSavingPerHour       float64
	ConsolidationMaxNodesPerReplacement int
	ConsolidationMaxReplacementsPerLoop int
	ConsolidationMaxSimulationsPerLoop  int
	ConsolidationSimulationTimeout      time.Duration
}

// Any reports whether a reason besides healing is on.
func (d Disruption) Any() bool {
	return d.DriftEnabled || d.MaxNodeLifetime > 0 || d.ConsolidationEnabled
}

// LeaderElection configures the Lease lock the autoscaler holds while it acts.
type LeaderElection struct {
	Enabled       bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	ResourceLock  string
	ResourceName  string
	// ResourceNamespace is accepted for compatibility and ignored, as upstream
	// does: the Lease lives in Options.Namespace.
	ResourceNamespace string
}

// Range is an inclusive <min>:<max> pair as used by --cores-total and --memory-total.
type Range struct {
	Min int64
	Max int64
}

// GPULimit is one --gpu-total value, <gpu_type>:<min>:<max>.
type GPULimit struct {
	Type string
	Min  int64
	Max  int64
}

// NodeGroupAutoscalingOptions are the defaults a node group can override
// through NodeGroup.GetOptions.
type NodeGroupAutoscalingOptions struct {
	ScaleDownUtilizationThreshold    float64
	ScaleDownGPUUtilizationThreshold float64
	ScaleDownUnneededTime            time.Duration
	ScaleDownUnreadyTime             time.Duration
	MaxNodeProvisionTime             time.Duration
	MaxNodeStartupTime               time.Duration
	IgnoreDaemonSetsUtilization      bool
	ZeroOrMaxNodeScaling             bool
	AllowNonAtomicScaleUpToMax       bool
	// MaxNodeLifetime is the group's --max-node-lifetime (0: its nodes do
	// not expire). Not upstream.
	MaxNodeLifetime time.Duration
	// DisruptionBudget is the group's own disruption budget: one or more
	// budgets in --disruption-budget's syntax, separated by '|', without
	// node-groups; "" for none (the flag's budgets hold). The disruption
	// engine parses it: a value that does not parse is logged and ignored.
	// Not upstream.
	DisruptionBudget string
}
