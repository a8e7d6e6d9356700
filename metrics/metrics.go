package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

const namespace = "cluster_autoscaler"

// Activity values of the last_activity gauge.
const (
	ActivityMain           = "main"
	ActivityMainSuccessful = "mainSuccessful"
	ActivityAutoscaling    = "autoscaling"
	ActivityScaleUp        = "scaleUp"
	ActivityScaleDown      = "scaleDown"
)

// Function labels of function_duration_seconds, upstream's values.
const (
	FunctionMain                      = "main"
	FunctionUpdateClusterState        = "updateClusterState"
	FunctionLoopWait                  = "loopWait"
	FunctionCloudProviderRefresh      = "cloudProviderRefresh"
	FunctionFilterOutSchedulable      = "filterOutSchedulable"
	FunctionScaleUp                   = "scaleUp"
	FunctionBuildPodEquivalenceGroups = "scaleUp:buildPodEquivalenceGroups"
	FunctionEstimate                  = "scaleUp:estimate"
	FunctionSkippedNodeGroups         = "scaleUp:skippedNodeGroupsSimulation"
	FunctionFindUnneeded              = "findUnneeded"
	FunctionScaleDown                 = "scaleDown"
	FunctionScaleDownNodeDeletion     = "scaleDown:nodeDeletion"
	FunctionScaleDownSoftTaint        = "scaleDown:softTaintUnneeded"
	// FunctionConsolidation is ours: the consolidation planner's step
	// (--consolidation-enabled); upstream has no consolidation.
	FunctionConsolidation = "consolidation"
)

// Reasons and directions of skipped_scale_events_count, upstream's values.
const (
	DirectionScaleUp    = "up"
	DirectionScaleDown  = "down"
	CPUResourceLimit    = "CpuResourceLimit"
	MemoryResourceLimit = "MemoryResourceLimit"
)

// Unschedulable pod types of unschedulable_pods_count.
const (
	PodsUnschedulable        = "unschedulable"
	PodsSchedulerUnprocessed = "scheduler_unprocessed"
)

// ErrorType labels errors_total; the values are upstream's.
type ErrorType string

// The error types upstream pre-initialises.
const (
	CloudProviderError            ErrorType = "cloudProviderError"
	APICallError                  ErrorType = "apiCallError"
	InternalError                 ErrorType = "internalError"
	TransientError                ErrorType = "transientError"
	ConfigurationError            ErrorType = "configurationError"
	NodeGroupDoesNotExistError    ErrorType = "nodeGroupDoesNotExistError"
	UnexpectedScaleDownStateError ErrorType = "unexpectedScaleDownStateError"
)

// Node states of nodes_count.
const (
	NodeStateReady      = "ready"
	NodeStateUnready    = "unready"
	NodeStateNotStarted = "notStarted"
	// Nodes with the condition Suspended=True.
	NodeStateSuspended = "suspended"
	// Instances without a Node, and those without one for longer than the
	// provision time.
	NodeStateUnregistered     = "unregistered"
	NodeStateLongUnregistered = "longUnregistered"
)

// TimeoutError is the failed_scale_ups_total reason of a scale-up whose
// nodes did not register within --max-node-provision-time.
const TimeoutError ErrorType = "timeout"

// Metrics holds every series. Build it once with New and pass it where needed.
type Metrics struct {
	// reg is where the series are registered; Registerer hands it to
	// parts that keep their own series (node healing).
	reg                      prometheus.Registerer
	lastActivity             *prometheus.GaugeVec
	functionDuration         *prometheus.HistogramVec
	functionDurationQuantile *prometheus.SummaryVec
	errorsTotal              *prometheus.CounterVec
	nodesCount               *prometheus.GaugeVec
	unschedulablePodsCount   *prometheus.GaugeVec
	nodeGroupsCount          *prometheus.GaugeVec
	scaledUpNodes            *prometheus.CounterVec
	failedScaleUps           *prometheus.CounterVec
	failedNodeCreations      *prometheus.CounterVec
	extra                    *extraMetrics
	maxNodesCount            prometheus.Gauge
	cpuCurrentCores          prometheus.Gauge
	memoryCurrentBytes       prometheus.Gauge
	cpuLimitsCores           *prometheus.GaugeVec
	memoryLimitsBytes        *prometheus.GaugeVec
	clusterSafeToAutoscale   prometheus.Gauge
	provreq                  *provreqMetrics
	expanderFallbacks        *prometheus.CounterVec
	scaleDown                *scaleDownMetrics
	nodeGroups               *nodeGroupMetrics
	deletedNodes             *prometheus.CounterVec
	oldUnregisteredRemoved   prometheus.Counter
	unregisteredBreakerOpen  prometheus.Gauge
	aggregated               *aggregatedDurations
	draTemplateMismatch      *prometheus.GaugeVec
	skippedPods              *prometheus.GaugeVec
}

// New creates the series and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		lastActivity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "last_activity",
			Help: "Unix time at which a part of the autoscaler last ran.",
		}, []string{"activity"}),
		functionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "function_duration_seconds",
			Help:    "Time taken by parts of the autoscaler's loop.",
			Buckets: prometheus.ExponentialBucketsRange(0.1, 1800, 150), // upstream's layout
		}, []string{"function"}),
		functionDurationQuantile: prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Namespace: namespace, Name: "function_duration_quantile_seconds",
			Help:       "Quantiles of the time taken by parts of the autoscaler's loop.",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
			MaxAge:     time.Hour,
		}, []string{"function"}),
		errorsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "errors_total",
			Help: "Loops that ended in an error, by error type.",
		}, []string{"type"}),
		nodesCount: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "nodes_count",
			Help: "Nodes in the cluster, by state.",
		}, []string{"state"}),
		unschedulablePodsCount: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "unschedulable_pods_count",
			Help: "Pending pods the scheduler could not place, by type.",
		}, []string{"type"}),
		nodeGroupsCount: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "node_groups_count",
			Help: "Node groups the autoscaler manages, by type.",
		}, []string{"node_group_type"}),
		scaledUpNodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "scaled_up_nodes_total",
			Help: "Nodes added by scale-ups, counted when the target size is increased.",
		}, []string{"gpu_resource_name", "gpu_name", "dra_drivers"}),
		failedScaleUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "failed_scale_ups_total",
			Help: "Scale-ups that failed, by reason.",
		}, []string{"reason", "gpu_resource_name", "gpu_name", "dra_drivers"}),
		maxNodesCount: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "max_nodes_count",
			Help: "Most nodes the autoscaler may run: --max-nodes-total when set, capped by the node groups' max sizes.",
		}),
		cpuCurrentCores: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cluster_cpu_current_cores",
			Help: "CPU cores of the cluster's nodes.",
		}),
		memoryCurrentBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cluster_memory_current_bytes",
			Help: "Memory of the cluster's nodes, in bytes.",
		}),
		cpuLimitsCores: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cpu_limits_cores",
			Help: "The --cores-total limits, by direction.",
		}, []string{"direction"}),
		memoryLimitsBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "memory_limits_bytes",
			Help: "The --memory-total limits in bytes, by direction.",
		}, []string{"direction"}),
		clusterSafeToAutoscale: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cluster_safe_to_autoscale",
			Help: "1 when few enough nodes are unready for the autoscaler to act (--ok-total-unready-count, --max-total-unready-percentage), else 0.",
		}),
	}
	m.deletedNodes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "deleted_nodes_total",
		Help: "Instances the autoscaler deleted, by reason (unregistered, failed-creation, ...).",
	}, []string{"reason"})
	m.oldUnregisteredRemoved = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "old_unregistered_nodes_removed_count",
		Help: "Instances deleted because they had no Node for longer than the provision time.",
	})
	m.unregisteredBreakerOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "unregistered_nodes_deletion_blocked",
		Help: "1 while the circuit breaker keeps long-unregistered instances from being deleted (too many at once), else 0.",
	})
	m.failedNodeCreations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "failed_node_creations_total",
		Help: "Nodes that failed to be created, by reason (one failed scale-up of five nodes counts five).",
	}, []string{"reason"})
	m.extra = newExtraMetrics()
	m.aggregated = newAggregatedDurations()
	reg.MustRegister(m.aggregated.hist)
	reg.MustRegister(m.extra.collectors()...)
	m.extra.init()
	reg.MustRegister(m.deletedNodes, m.oldUnregisteredRemoved, m.unregisteredBreakerOpen, m.failedNodeCreations)
	for _, r := range []string{"unregistered", "failed-creation", "atomic-rollback"} {
		m.deletedNodes.WithLabelValues(r).Add(0)
	}
	m.nodeGroups = newNodeGroupMetrics()
	reg.MustRegister(m.nodeGroups.collectors()...)
	m.scaleDown = newScaleDownMetrics()
	reg.MustRegister(m.scaleDown.collectors()...)
	for _, r := range []string{"empty", "underutilized", "unready"} {
		m.scaleDown.scaledDown.WithLabelValues(r, "", "", "").Add(0)
	}
	for _, r := range []string{"succeeded", "failed"} {
		m.scaleDown.evicted.WithLabelValues(r).Add(0)
	}
	m.provreq = newProvreqMetrics()
	reg.MustRegister(m.provreq.collectors()...)
	m.expanderFallbacks = newExpanderFallbacks()
	reg.MustRegister(m.expanderFallbacks)
	m.draTemplateMismatch, m.skippedPods = newDRATemplateMismatch(), newSkippedPods()
	reg.MustRegister(m.draTemplateMismatch, m.skippedPods)
	m.skippedPods.WithLabelValues(SkippedPodsFilterOutSchedulable).Set(0)
	reg.MustRegister(m.clusterSafeToAutoscale, m.lastActivity, m.functionDuration, m.functionDurationQuantile, m.errorsTotal,
		m.nodesCount, m.unschedulablePodsCount, m.nodeGroupsCount, m.scaledUpNodes, m.failedScaleUps,
		m.maxNodesCount, m.cpuCurrentCores, m.memoryCurrentBytes, m.cpuLimitsCores, m.memoryLimitsBytes)
	for _, r := range []ErrorType{CloudProviderError, APICallError, TimeoutError} {
		m.failedScaleUps.WithLabelValues(string(r), "", "", "").Add(0)
		m.failedNodeCreations.WithLabelValues(string(r)).Add(0)
	}
	for _, t := range []ErrorType{CloudProviderError, APICallError, InternalError, TransientError,
		ConfigurationError, NodeGroupDoesNotExistError, UnexpectedScaleDownStateError} {
		m.errorsTotal.WithLabelValues(string(t)).Add(0)
	}
	return m
}

// UpdateLastActivity records that activity ran at now.
func (m *Metrics) UpdateLastActivity(activity string, now time.Time) {
	m.lastActivity.WithLabelValues(activity).Set(float64(now.Unix()))
}

// logLongDuration is how long a step may take before its duration is also
// logged (at V(4)), as upstream.
const logLongDuration = 5 * time.Second

// UpdateDuration records how long function took.
func (m *Metrics) UpdateDuration(function string, d time.Duration) {
	if d > logLongDuration {
		klog.V(4).InfoS("Function took long to complete", "function", function, "duration", d)
	}
	m.functionDuration.WithLabelValues(function).Observe(d.Seconds())
	m.functionDurationQuantile.WithLabelValues(function).Observe(d.Seconds())
}

// RegisterError counts a loop that ended with an error of type t.
func (m *Metrics) RegisterError(t ErrorType) {
	m.errorsTotal.WithLabelValues(string(t)).Inc()
}

// UpdateNodesCount sets the node counts by state.
func (m *Metrics) UpdateNodesCount(ready, unready, notStarted, suspended, unregistered, longUnregistered int) {
	m.nodesCount.WithLabelValues(NodeStateReady).Set(float64(ready))
	m.nodesCount.WithLabelValues(NodeStateUnready).Set(float64(unready))
	m.nodesCount.WithLabelValues(NodeStateNotStarted).Set(float64(notStarted))
	m.nodesCount.WithLabelValues(NodeStateSuspended).Set(float64(suspended))
	m.nodesCount.WithLabelValues(NodeStateUnregistered).Set(float64(unregistered))
	m.nodesCount.WithLabelValues(NodeStateLongUnregistered).Set(float64(longUnregistered))
}

// UpdateUnschedulablePodsCount sets the number of scheduler-marked
// unschedulable pods, and of pending pods of --bypassed-scheduler-names
// their scheduler has not processed yet.
func (m *Metrics) UpdateUnschedulablePodsCount(unschedulable, schedulerUnprocessed int) {
	m.unschedulablePodsCount.WithLabelValues(PodsUnschedulable).Set(float64(unschedulable))
	m.unschedulablePodsCount.WithLabelValues(PodsSchedulerUnprocessed).Set(float64(schedulerUnprocessed))
}

// UpdateNodeGroupsCount sets the number of node groups the autoscaler manages.
func (m *Metrics) UpdateNodeGroupsCount(autoscaled int) {
	m.nodeGroupsCount.WithLabelValues("autoscaled").Set(float64(autoscaled))
	m.nodeGroupsCount.WithLabelValues("autoprovisioned").Set(0)
}

// UpdateClusterSize sets the node limit, the cluster's current cores and
// memory, and the cores and memory limits.
func (m *Metrics) UpdateClusterSize(maxNodes int, cores float64, memoryBytes float64,
	minCores, maxCores, minMemoryBytes, maxMemoryBytes int64) {
	m.maxNodesCount.Set(float64(maxNodes))
	m.cpuCurrentCores.Set(cores)
	m.memoryCurrentBytes.Set(memoryBytes)
	m.cpuLimitsCores.WithLabelValues("minimum").Set(float64(minCores))
	m.cpuLimitsCores.WithLabelValues("maximum").Set(float64(maxCores))
	m.memoryLimitsBytes.WithLabelValues("minimum").Set(float64(minMemoryBytes))
	m.memoryLimitsBytes.WithLabelValues("maximum").Set(float64(maxMemoryBytes))
}

// UpdateClusterSafeToAutoscale sets cluster_safe_to_autoscale.
func (m *Metrics) UpdateClusterSafeToAutoscale(safe bool) {
	v := 0.0
	if safe {
		v = 1
	}
	m.clusterSafeToAutoscale.Set(v)
}

// RegisterDeletedNodes counts instances deleted for reason.
func (m *Metrics) RegisterDeletedNodes(reason string, n int) {
	m.deletedNodes.WithLabelValues(reason).Add(float64(n))
}

// RegisterOldUnregisteredNodesRemoved counts deleted long-unregistered instances.
func (m *Metrics) RegisterOldUnregisteredNodesRemoved(n int) {
	m.oldUnregisteredRemoved.Add(float64(n))
}

// UpdateUnregisteredBreaker says whether the unregistered-instance breaker is open.
func (m *Metrics) UpdateUnregisteredBreaker(open bool) {
	v := 0.0
	if open {
		v = 1
	}
	m.unregisteredBreakerOpen.Set(v)
}

// Registerer is the registry the series are registered with (nil when none).
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }
