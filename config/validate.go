package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"
)

// Expander names, as upstream registers them.
const (
	RandomExpander     = "random"
	MostPodsExpander   = "most-pods"
	LeastWasteExpander = "least-waste"
	LeastNodesExpander = "least-nodes"
	PriceExpander      = "price"
	PriorityExpander   = "priority"
	GRPCExpander       = "grpc"
)

// KnownExpanders lists every accepted --expander name.
var KnownExpanders = []string{RandomExpander, MostPodsExpander, LeastWasteExpander,
	LeastNodesExpander, PriceExpander, PriorityExpander, GRPCExpander}

// Upper bounds of the cluster-wide limits: the largest values whose
// millicores and bytes still fit in an int64.
const (
	MaxCoresTotal     = math.MaxInt64 / 1000
	MaxMemoryTotalGiB = math.MaxInt64 >> 30
)

// --expendable-pods-priority-cutoff and --scale-down-non-empty-candidates-count
// take any integer, as upstream's do (a non-positive candidate count turns
// that heuristic off).

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// Validate reports every invalid option at once. Each message starts with the
// flag that sets the option, so an operator can fix a manifest in one pass.
// Values upstream accepts are never refused here, however odd: Warnings
// lists those, for a start-up log line.
func (o *Options) Validate() error { return o.validate().err() }

// Warnings lists the values upstream accepts that are odd enough to be
// worth a start-up warning (each starts with its flag), with what they do.
func (o *Options) Warnings() []string { return o.validate().warns }

func (o *Options) validate() *validator {
	v := &validator{}
	o.validateClient(v)
	o.validateLeaderElection(v)
	o.validateExplain(v)
	o.validateLoop(v)
	o.validateProvider(v)
	o.validateClusterLimits(v)
	o.validateExpanders(v)
	o.validateScaleUp(v)
	o.validateNodeGroupDefaults(v)
	o.validateScaleDown(v)
	v.check(dnsSubdomain.MatchString(o.StatusConfigMapName) && len(o.StatusConfigMapName) <= 253,
		"--status-config-map-name", "%q is not a valid ConfigMap name", o.StatusConfigMapName)
	o.validateProvReq(v)
	o.validateCleanup(v)
	o.validateProvReqLifetimes(v)
	o.validateDisruption(v)
	v.check(o.EnableDynamicResourceAllocation, "--enable-dynamic-resource-allocation", "is locked to true")
	// As upstream, a no-op without the injection, not an error.
	v.odd(!o.CapacityBufferReadyReplicasEnabled || o.CapacityBufferPodInjectionEnabled, "--capacity-buffer-ready-replicas-enabled",
		"does nothing without --capacity-buffer-pod-injection-enabled: no buffer's readyReplicas is written")
	return v
}

// validateClient checks the API server client.
func (o *Options) validateClient(v *validator) {
	v.check(o.Address != "", "--address", "must not be empty")
	v.odd(dnsLabel.MatchString(o.Namespace), "--namespace", "%q is not a valid namespace name: the status ConfigMap, the Lease and the events there will fail", o.Namespace)
	v.check(o.KubeClientQPS > 0 && !math.IsInf(o.KubeClientQPS, 1), "--kube-client-qps", "must be positive and finite, got %v", o.KubeClientQPS)
	v.check(o.KubeClientBurst > 0, "--kube-client-burst", "must be positive, got %d", o.KubeClientBurst)
	v.check(slices.Contains([]string{"application/vnd.kubernetes.protobuf", "application/json"}, o.KubeAPIContentType),
		"--kube-api-content-type", "must be application/vnd.kubernetes.protobuf or application/json, got %q", o.KubeAPIContentType)
}

// validateLoop checks the loop's timing, liveness and heap.
func (o *Options) validateLoop(v *validator) {
	v.positive(o.ScanInterval, "--scan-interval")
	v.nonNegative(o.ScaleUpBatchIdle, "--scale-up-batch-idle-duration")
	v.nonNegative(o.ScaleUpBatchMax, "--scale-up-batch-max-duration")
	v.check(o.ScaleUpBatchMax >= o.ScaleUpBatchIdle, "--scale-up-batch-max-duration",
		"must not be shorter than --scale-up-batch-idle-duration (%v), got %v", o.ScaleUpBatchIdle, o.ScaleUpBatchMax)
	v.positive(o.MaxInactivity, "--max-inactivity")
	v.positive(o.MaxFailingTime, "--max-failing-time")
	v.positive(o.MaxStartupTime, "--max-startup-time")
	v.check(o.HeapHeadroomRatio >= 0 && !math.IsInf(o.HeapHeadroomRatio, 1), "--heap-headroom-ratio",
		"must be zero (off) or positive and finite, got %v", o.HeapHeadroomRatio)
}

// validateProvider checks the cloud provider and its node groups.
func (o *Options) validateProvider(v *validator) {
	v.check(o.CloudProvider != "", "--cloud-provider", "must not be empty")
	// Only the kwok provider reads it; with another provider it is a values
	// file of a kwok cluster applied to another (or the reverse).
	v.check(!o.KwokProviderEnabled || o.CloudProvider == "kwok", "--kwok-provider-enabled",
		"enables the kwok provider, which creates simulated Nodes; it is not for --cloud-provider=%s", o.CloudProvider)
	v.check(o.AWSInterruptionQueue == "" || o.CloudProvider == "aws", "--aws-interruption-queue",
		"is read by the aws provider only, not --cloud-provider=%s", o.CloudProvider)
	v.check(!o.AWSInterruptionRebalance || o.AWSInterruptionQueue != "", "--aws-interruption-rebalance",
		"needs --aws-interruption-queue, which the rebalance recommendations come from")
	v.nonNegative(o.AWSInterruptedCapacityAvoidTime, "--aws-interrupted-capacity-avoid-time")
	v.nonNegative(o.AWSCapacityBlockDrainBefore, "--aws-capacity-block-drain-before")
	for _, s := range o.NodeGroups {
		if _, err := ParseNodeGroupSpec(s); err != nil {
			v.add("--nodes", "%v", err)
		}
	}
}

// validateClusterLimits checks the cluster-wide limits: nodes, cores, memory and GPUs.
func (o *Options) validateClusterLimits(v *validator) {
	v.check(o.MaxNodesTotal >= 0, "--max-nodes-total", "must not be negative, got %d", o.MaxNodesTotal)
	v.check(o.Cores.Min >= 0 && o.Cores.Max >= o.Cores.Min, "--cores-total", "want 0 <= min <= max, got %s", o.Cores)
	// The limits are used in millicores and bytes: larger values would
	// overflow 64 bits and turn into negative limits.
	v.check(o.Cores.Max <= MaxCoresTotal, "--cores-total", "max must not exceed %d cores, got %d", int64(MaxCoresTotal), o.Cores.Max)
	v.check(o.MemoryGiB.Min >= 0 && o.MemoryGiB.Max >= o.MemoryGiB.Min, "--memory-total", "want 0 <= min <= max, got %s", o.MemoryGiB)
	v.check(o.MemoryGiB.Max <= MaxMemoryTotalGiB, "--memory-total", "max must not exceed %d GiB, got %d", int64(MaxMemoryTotalGiB), o.MemoryGiB.Max)

	gpuTypes := map[string]bool{}
	for _, g := range o.GPUTotal {
		// --gpu-total keeps one limit per type; scale-up and scale-down
		// would read different ones of a type given twice.
		v.check(!gpuTypes[g.Type], "--gpu-total", "type %q has two limits", g.Type)
		v.check(g.Type != "" && g.Min >= 0 && g.Max >= g.Min, "--gpu-total", "want <gpu_type>:<min>:<max> with 0 <= min <= max, got %+v", g)
		gpuTypes[g.Type] = true
	}
}

// validateScaleUp checks the scale-up: its size and time budgets, balancing, back-off, cluster health and schedulers.
func (o *Options) validateScaleUp(v *validator) {
	v.check(o.MaxNodesPerScaleUp > 0, "--max-nodes-per-scaleup", "must be positive, got %d", o.MaxNodesPerScaleUp)
	v.positive(o.MaxNodeGroupBinpackingDuration, "--max-nodegroup-binpacking-duration")
	v.positive(o.MaxBinpackingTime, "--max-binpacking-time")
	v.nonNegative(o.PendingPodsBatchingTimeout, "--pending-pods-batching-timeout")
	v.nonNegative(o.NewPodScaleUpDelay, "--new-pod-scale-up-delay")
	v.nonNegative(o.NodeInfoCacheExpireTime, "--node-info-cache-expire-time")
	v.check(len(o.BalancingLabels) == 0 || len(o.BalancingIgnoreLabels) == 0, "--balancing-label",
		"cannot be combined with --balancing-ignore-label")
	v.ratio(o.MaxAllocatableDifferenceRatio, "--max-allocatable-difference-ratio")
	v.ratio(o.MaxFreeDifferenceRatio, "--max-free-difference-ratio")
	v.ratio(o.MemoryDifferenceRatio, "--memory-difference-ratio")
	v.positive(o.InitialNodeGroupBackoff, "--initial-node-group-backoff-duration")
	v.odd(o.MaxNodeGroupBackoff >= o.InitialNodeGroupBackoff, "--max-node-group-backoff-duration",
		"%v is below --initial-node-group-backoff-duration (%v): the first back-off lasts the initial duration, every later one the maximum", o.MaxNodeGroupBackoff, o.InitialNodeGroupBackoff)
	v.positive(o.NodeGroupBackoffResetTimeout, "--node-group-backoff-reset-timeout")
	v.check(o.OkTotalUnreadyCount >= 0, "--ok-total-unready-count", "must not be negative, got %d", o.OkTotalUnreadyCount)
	v.check(!math.IsNaN(o.MaxTotalUnreadyPercentage), "--max-total-unready-percentage", "must be a number, got %v", o.MaxTotalUnreadyPercentage)
	v.odd(o.MaxTotalUnreadyPercentage >= 0 && o.MaxTotalUnreadyPercentage <= 100, "--max-total-unready-percentage",
		"%v is outside 0..100", o.MaxTotalUnreadyPercentage)
	v.check(o.PredicateParallelism >= 1, "--predicate-parallelism", "must be at least 1, got %d", o.PredicateParallelism)
	v.odd(o.SchedulerVerbosity >= 0, "--scheduler-verbosity",
		"%d is negative: the scheduler framework's informational messages are all dropped, its errors still logged", o.SchedulerVerbosity)
	if len(o.AllowedSchedulerNames) > 0 {
		for _, n := range o.BypassedSchedulerNames {
			v.check(slices.Contains(o.AllowedSchedulerNames, n), "--bypassed-scheduler-names",
				"%q is not in --allowed-scheduler-names", n)
		}
	}
}

// validateNodeGroupDefaults checks the per-node-group defaults.
func (o *Options) validateNodeGroupDefaults(v *validator) {
	d := o.NodeGroupDefaults
	v.ratio(d.ScaleDownUtilizationThreshold, "--scale-down-utilization-threshold")
	v.ratio(d.ScaleDownGPUUtilizationThreshold, "--scale-down-gpu-utilization-threshold")
	v.nonNegative(d.ScaleDownUnneededTime, "--scale-down-unneeded-time")
	v.nonNegative(d.ScaleDownUnreadyTime, "--scale-down-unready-time")
	v.positive(d.MaxNodeProvisionTime, "--max-node-provision-time")
	v.positive(d.MaxNodeStartupTime, "--max-node-startup-time")
}

// validateScaleDown checks the scale-down: delays, parallelism, drain and deletion.
func (o *Options) validateScaleDown(v *validator) {
	v.nonNegative(o.ScaleDownDelayAfterAdd, "--scale-down-delay-after-add")
	v.nonNegative(o.ScaleDownDelayAfterDelete, "--scale-down-delay-after-delete")
	v.nonNegative(o.ScaleDownDelayAfterFailure, "--scale-down-delay-after-failure")
	v.odd(o.MaxScaleDownParallelism >= 1, "--max-scale-down-parallelism", "%d: no node will be removed by scale-down", o.MaxScaleDownParallelism)
	v.odd(o.MaxDrainParallelism >= 1, "--max-drain-parallelism", "%d: no node with pods to move will be removed by scale-down", o.MaxDrainParallelism)
	v.check(o.MaxGracefulTerminationSec >= 0 && int64(o.MaxGracefulTerminationSec) <= math.MaxInt64/int64(time.Second),
		"--max-graceful-termination-sec", "must be between 0 and %d, got %d", math.MaxInt64/int64(time.Second), o.MaxGracefulTerminationSec)
	v.positive(o.MaxPodEvictionTime, "--max-pod-eviction-time")
	v.nonNegative(o.NodeDeleteDelayAfterTaint, "--node-delete-delay-after-taint")
	v.check(o.MinReplicaCount >= 0, "--min-replica-count", "must not be negative, got %d", o.MinReplicaCount)
	v.ratio(o.ScaleDownCandidatesPoolRatio, "--scale-down-candidates-pool-ratio")
	v.check(o.ScaleDownCandidatesPoolMinCount >= 0, "--scale-down-candidates-pool-min-count", "must not be negative")
	v.positive(o.ScaleDownSimulationTimeout, "--scale-down-simulation-timeout")
	v.nonNegative(o.UnremovableNodeRecheckTimeout, "--unremovable-node-recheck-timeout")
	v.check(o.MaxBulkSoftTaintCount >= 0, "--max-bulk-soft-taint-count", "must not be negative, got %d", o.MaxBulkSoftTaintCount)
	v.nonNegative(o.MaxBulkSoftTaintTime, "--max-bulk-soft-taint-time")
	v.nonNegative(o.NodeDeletionDelayTimeout, "--node-deletion-delay-timeout")
	v.nonNegative(o.NodeDeletionBatcherInterval, "--node-deletion-batcher-interval")
	v.nonNegative(o.NodeDeletionCandidateTTL, "--node-deletion-candidate-ttl")
	v.nonNegative(o.BlockingSystemPodDisruptionTimeout, "--blocking-system-pod-distruption-timeout")
	if o.DrainPriorityConfig != "" {
		if _, err := ParseDrainPriorityConfig(o.DrainPriorityConfig); err != nil {
			v.add("--drain-priority-config", "%v", err)
		}
	}
}

// validateProvReq checks the ProvisioningRequests' back-off, check-capacity batches and booking.
func (o *Options) validateProvReq(v *validator) {
	v.positive(o.ProvReqInitialBackoff, "--provisioning-request-initial-backoff-time")
	v.odd(o.ProvReqMaxBackoff >= o.ProvReqInitialBackoff, "--provisioning-request-max-backoff-time",
		"%v is below --provisioning-request-initial-backoff-time (%v): the first retry waits the initial time, every later one the maximum", o.ProvReqMaxBackoff, o.ProvReqInitialBackoff)
	v.check(o.ProvReqMaxBackoffCacheSize >= 1, "--provisioning-request-max-backoff-cache-size", "must be at least 1")
	v.positive(o.CheckCapacityBatchTimebox, "--check-capacity-provisioning-request-batch-timebox")
	v.check(o.CheckCapacityMaxBatchSize >= 1, "--check-capacity-provisioning-request-max-batch-size", "must be at least 1")
	v.positive(o.ProvReqBookingTime, "--provisioning-request-booking-time")
}

// validateCleanup checks the cleanup of broken instances.
func (o *Options) validateCleanup(v *validator) {
	v.check(o.UnregisteredBreakerRatio > 0 && o.UnregisteredBreakerRatio <= 1, "--unregistered-nodes-breaker-ratio",
		"must be in (0, 1], got %v", o.UnregisteredBreakerRatio)
	v.check(o.UnregisteredBreakerMinimum >= 0, "--unregistered-nodes-breaker-minimum", "must not be negative, got %d",
		o.UnregisteredBreakerMinimum)
	v.check(o.MaxBrokenNodeDeletionsPerLoop >= 1, "--max-broken-node-deletions-per-loop", "must be at least 1, got %d",
		o.MaxBrokenNodeDeletionsPerLoop)
}

// validateProvReqLifetimes checks the ProvisioningRequests' pod templates, expiry, retention and size.
func (o *Options) validateProvReqLifetimes(v *validator) {
	v.check(o.ProvReqTemplateGracePeriod >= 0, "--provisioning-request-pod-template-grace-period", "must not be negative")
	v.positive(o.ProvReqExpiryTime, "--provisioning-request-expiry-time")
	v.positive(o.ProvReqRetentionTime, "--provisioning-request-retention-time")
	v.check(o.ProvReqMaxRunGrace >= 0, "--provisioning-request-max-run-grace", "must not be negative")
	v.check(o.ProvReqMaxPods >= 1, "--max-pods-per-provisioning-request", "must be at least 1, got %d", o.ProvReqMaxPods)
}
func (o *Options) validateLeaderElection(v *validator) {
	le := o.LeaderElection
	v.check(le.ResourceLock == "leases", "--leader-elect-resource-lock", "only \"leases\" is supported, got %q", le.ResourceLock)
	v.check(dnsSubdomain.MatchString(le.ResourceName), "--leader-elect-resource-name", "%q is not a valid Lease name", le.ResourceName)
	if !le.Enabled {
		return
	}
	v.positive(le.RetryPeriod, "--leader-elect-retry-period")
	// client-go's elector needs lease > renew deadline > 1.2 * retry period.
	v.check(le.LeaseDuration > le.RenewDeadline, "--leader-elect-lease-duration",
		"must be greater than --leader-elect-renew-deadline (%v), got %v", le.RenewDeadline, le.LeaseDuration)
	v.check(float64(le.RenewDeadline) > 1.2*float64(le.RetryPeriod), "--leader-elect-renew-deadline",
		"must be greater than 1.2 x --leader-elect-retry-period (%v), got %v", le.RetryPeriod, le.RenewDeadline)
}

// validateExpanders applies upstream's chaining rules: known names, no
// duplicates, nothing after the random strategy, and TLS for grpc.
func (o *Options) validateExpanders(v *validator) {
	if len(o.Expanders) == 0 {
		v.add("--expander", "must name at least one expander")
	}
	seen := map[string]bool{}
	for i, name := range o.Expanders {
		switch {
		case !slices.Contains(KnownExpanders, name):
			v.add("--expander", "%q is not supported (known: %v)", name, KnownExpanders)
		case seen[name]:
			v.add("--expander", "%q is specified multiple times", name)
		case name == RandomExpander && i != len(o.Expanders)-1:
			v.add("--expander", "nothing may follow %q in the chain", RandomExpander)
		}
		seen[name] = true
	}
	if seen[GRPCExpander] {
		v.check(o.GRPCExpanderURL != "", "--grpc-expander-url", "is required by the grpc expander")
		v.check(o.GRPCExpanderCert != "", "--grpc-expander-cert", "is required by the grpc expander: insecure connections are not allowed")
		v.check(o.GRPCExpanderTimeout > 0, "--grpc-expander-timeout", "must be positive, got %v", o.GRPCExpanderTimeout)
	}
}

type validator struct {
	errs  []error
	warns []string
}

// odd records a warning (the value is accepted) unless ok.
func (v *validator) odd(ok bool, flag, format string, args ...any) {
	if !ok {
		v.warns = append(v.warns, fmt.Sprintf("%s: %s", flag, fmt.Sprintf(format, args...)))
	}
}

func (v *validator) add(flag, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: %s", flag, fmt.Sprintf(format, args...)))
}

func (v *validator) check(ok bool, flag, format string, args ...any) {
	if !ok {
		v.add(flag, format, args...)
	}
}

func (v *validator) positive(d time.Duration, flag string) {
	v.check(d > 0, flag, "must be positive, got %v", d)
}

func (v *validator) nonNegative(d time.Duration, flag string) {
	v.check(d >= 0, flag, "must not be negative, got %v", d)
}

// ratio refuses what is not a number and warns about a value outside 0..1,
// which upstream accepts (a threshold of 2 makes every node underutilized).
func (v *validator) ratio(f float64, flag string) {
	v.check(!math.IsNaN(f) && !math.IsInf(f, 0), flag, "must be a finite number, got %v", f)
	v.odd(math.IsNaN(f) || (f >= 0 && f <= 1), flag, "%v is outside 0..1", f)
}

func (v *validator) err() error { return errors.Join(v.errs...) }

// validateDisruption checks the disruption reasons' numbers; the budgets'
// syntax is checked where they are parsed (the builder).
func (o *Options) validateDisruption(v *validator) {
	d := o.Disruption
	v.nonNegative(d.MaxNodeLifetime, "--max-node-lifetime")
	v.check(d.ConsolidationMinSavingRatio >= 0 && d.ConsolidationMinSavingRatio <= 1, "--consolidation-min-saving-ratio",
		"must be within [0, 1], got %v", d.ConsolidationMinSavingRatio)
	v.check(d.ConsolidationMinSavingPerHour >= 0 && !math.IsInf(d.ConsolidationMinSavingPerHour, 1),
		"--consolidation-min-saving-per-hour", "must be zero or positive and finite, got %v", d.ConsolidationMinSavingPerHour)
	v.check(d.ConsolidationMaxNodesPerReplacement >= 1, "--consolidation-max-nodes-per-replacement",
		"must be at least 1, got %d", d.ConsolidationMaxNodesPerReplacement)
	v.check(d.ConsolidationMaxReplacementsPerLoop >= 0, "--consolidation-max-replacements-per-loop",
		"must not be negative, got %d", d.ConsolidationMaxReplacementsPerLoop)
	v.check(d.ConsolidationMaxSimulationsPerLoop >= 1, "--consolidation-max-simulations-per-loop",
		"must be at least 1, got %d", d.ConsolidationMaxSimulationsPerLoop)
	v.nonNegative(d.ConsolidationSimulationTimeout, "--consolidation-simulation-timeout")
}
