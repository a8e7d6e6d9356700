package metrics

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/taints"
)

// extraMetrics are upstream's series for GPUs, limits, taints, node groups
// and binpacking, with upstream's names, types, labels and buckets.
type extraMetrics struct {
	scaledUpGPU           *prometheus.CounterVec
	failedGPUScaleUps     *prometheus.CounterVec
	scaledDownGPU         *prometheus.CounterVec
	skippedScaleEvents    *prometheus.CounterVec
	pendingNodeDeletions  prometheus.Gauge
	nodeTaints            *prometheus.GaugeVec
	overflowingControls   prometheus.Gauge
	binpackingHetero      *prometheus.HistogramVec
	maxNodeSkipEval       prometheus.Gauge
	createdNodeGroups     *prometheus.CounterVec
	deletedNodeGroups     *prometheus.CounterVec
	mu                    sync.Mutex
	knownTaintTypes       map[string]bool
	knownUnremovableLabel map[string]bool
}

func newExtraMetrics() *extraMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	}
	return &extraMetrics{
		scaledUpGPU: counter("scaled_up_gpu_nodes_total",
			"Nodes with GPUs added by scale-ups, by GPU resource and type (deprecated upstream in 1.36).",
			"gpu_resource_name", "gpu_name"),
		failedGPUScaleUps: counter("failed_gpu_scale_ups_total",
			"Failed scale-ups of node groups with GPUs, by reason, GPU resource and type (deprecated upstream in 1.36).",
			"reason", "gpu_resource_name", "gpu_name"),
		scaledDownGPU: counter("scaled_down_gpu_nodes_total",
			"Nodes with GPUs removed by scale-down, by reason, GPU resource and type (deprecated upstream in 1.36).",
			"reason", "gpu_resource_name", "gpu_name"),
		skippedScaleEvents: counter("skipped_scale_events_count",
			"Scale-ups and scale-downs not made because of --cores-total or --memory-total, by direction and reason.",
			"direction", "reason"),
		pendingNodeDeletions: gauge("pending_node_deletions",
			"Node removals started and not yet finished or aborted when the scale-down step ended."),
		nodeTaints: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "node_taints_count",
			Help: "Taints on the cluster's nodes, by type."}, []string{"type"}),
		overflowingControls: gauge("overflowing_controllers_count",
			"Controllers whose pods are too varied to be treated as equivalent."),
		binpackingHetero: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name:    "binpacking_heterogeneity",
			Help:    "Pod equivalence groups estimated together in one binpacking, by the template's instance type and CPUs and the pods' namespaces.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 6), // 1, 2, 4, ..., 32, as upstream
		}, []string{"instance_type", "cpu_count", "namespace_count"}),
		maxNodeSkipEval: gauge("max_node_skip_eval_duration_seconds",
			"Longest time, among the nodes scale-down currently keeps, since a node was first kept (skipped)."),
		createdNodeGroups: counter("created_node_groups_total",
			"Node groups created by node auto-provisioning, by group type.", "group_type"),
		deletedNodeGroups: counter("deleted_node_groups_total",
			"Node groups deleted by node auto-provisioning, by group type.", "group_type"),
		knownTaintTypes:       map[string]bool{},
		knownUnremovableLabel: map[string]bool{},
	}
}

func (e *extraMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{e.scaledUpGPU, e.failedGPUScaleUps, e.scaledDownGPU, e.skippedScaleEvents,
		e.pendingNodeDeletions, e.nodeTaints, e.overflowingControls, e.binpackingHetero, e.maxNodeSkipEval,
		e.createdNodeGroups, e.deletedNodeGroups}
}

// init sets the series upstream pre-sets to zero.
func (e *extraMetrics) init() {
	for _, d := range []string{DirectionScaleDown, DirectionScaleUp} {
		for _, r := range []string{CPUResourceLimit, MemoryResourceLimit} {
			e.skippedScaleEvents.WithLabelValues(d, r).Add(0)
		}
	}
}

// GPU holds the GPU labels of a node for the scale-up and scale-down
// counters; the zero value is a node without GPU.
type GPU struct {
	ResourceName string
	Name         string
	DRADrivers   string
}

// Values of the gpu_name label when the type cannot be told, upstream's.
const (
	GPUGeneric    = "generic"
	GPUMissing    = "missing-gpu"
	GPUNotListed  = "not-listed"
	gpuDRAPrefix  = "dra_"
	draCustomName = "custom.driver"
)

// knownDRADrivers are the DRA drivers dra_drivers names; others are folded
// into custom.driver, as upstream.
var knownDRADrivers = map[string]bool{"compute-domain.nvidia.com": true, "dra.net": true, "gpu.nvidia.com": true,
	"tpu.google.com": true}

// GPUOf tells the GPU labels of node (a real node or a node group's
// template) from the provider's GPU configuration of it (nil: no GPU) and
// the GPU types the provider lists (nil or empty: any type is listed).
func GPUOf(cfg *cloudprovider.GpuConfig, node *apiv1.Node, available map[string]struct{}) GPU {
	if cfg == nil || node == nil {
		return GPU{}
	}
	g := GPU{ResourceName: string(cfg.ExtendedResourceName)}
	if cfg.ExposedViaDra() {
		g.ResourceName = gpuDRAPrefix + cfg.DraDriverName
		g.DRADrivers = draDrivers([]string{cfg.DraDriverName})
	}
	typ, labelled := node.Labels[cfg.Label]
	if cfg.Type != "" {
		typ, labelled = cfg.Type, true
	}
	capacity, hasCapacity := node.Status.Capacity[cfg.ExtendedResourceName]
	hasGPU := cfg.ExposedViaDra() || (hasCapacity && !capacity.IsZero())
	switch {
	case !labelled:
		g.Name = GPUGeneric
	case len(available) > 0 && !listed(available, typ):
		g.Name = GPUNotListed
	case !hasGPU && !isTemplate(node):
		g.Name = GPUMissing
	default:
		g.Name = typ
	}
	return g
}

func listed(available map[string]struct{}, typ string) bool {
	_, ok := available[typ]
	return ok
}

// isTemplate tells a node group's template (whose GPU capacity may be set
// only once a real node runs the device plugin) from a real node.
func isTemplate(n *apiv1.Node) bool {
	return n.Labels["cluster-autoscaler.kubernetes.io/template-node"] == "true"
}

// WithDevices adds to g's dra_drivers label the drivers of the node-local
// ResourceSlices its node publishes (a template's: those its nodes will
// publish), as upstream labels the nodes with the DRA drivers they have,
// GPU or not: a node without GPU but with a dra.net NIC is labelled
// dra_drivers="dra.net".
func (g GPU) WithDevices(slices []*resourceapi.ResourceSlice) GPU {
	if len(slices) == 0 {
		return g
	}
	var names []string
	if g.DRADrivers != "" {
		names = strings.Split(g.DRADrivers, ",")
	}
	for _, sl := range slices {
		if sl != nil && sl.Spec.Driver != "" && sl.Spec.NodeName != nil {
			names = append(names, sl.Spec.Driver)
		}
	}
	if len(names) == 0 {
		return g
	}
	g.DRADrivers = draDrivers(names)
	return g
}

func draDrivers(names []string) string {
	set := map[string]bool{}
	for _, n := range names {
		if !knownDRADrivers[n] {
			n = draCustomName
		}
		set[n] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// RegisterScaleUp counts nodes added to a node group whose nodes have gpu.
func (m *Metrics) RegisterScaleUp(nodes int, gpu GPU) {
	if nodes <= 0 {
		return
	}
	m.scaledUpNodes.WithLabelValues(gpu.ResourceName, gpu.Name, gpu.DRADrivers).Add(float64(nodes))
	if gpu.Name != "" {
		m.extra.scaledUpGPU.WithLabelValues(gpu.ResourceName, gpu.Name).Add(float64(nodes))
	}
}

// RegisterFailedScaleUp counts a failed scale-up of reason t of a node
// group whose nodes have gpu, and the nodes it failed to create.
func (m *Metrics) RegisterFailedScaleUp(t ErrorType, nodes int, gpu GPU) {
	m.failedScaleUps.WithLabelValues(string(t), gpu.ResourceName, gpu.Name, gpu.DRADrivers).Inc()
	if nodes > 0 {
		m.failedNodeCreations.WithLabelValues(string(t)).Add(float64(nodes))
	}
	if gpu.Name != "" {
		m.extra.failedGPUScaleUps.WithLabelValues(string(t), gpu.ResourceName, gpu.Name).Inc()
	}
}

// RegisterScaleDown counts n nodes with gpu removed for reason.
func (m *Metrics) RegisterScaleDown(reason string, n int, gpu GPU) {
	m.scaleDown.scaledDown.WithLabelValues(reason, gpu.ResourceName, gpu.Name, gpu.DRADrivers).Add(float64(n))
	if gpu.Name != "" {
		m.extra.scaledDownGPU.WithLabelValues(reason, gpu.ResourceName, gpu.Name).Add(float64(n))
	}
}

// RegisterSkippedScaleEvent counts a scale-up or scale-down (direction
// DirectionScaleUp or DirectionScaleDown) not made because of a limit
// (CPUResourceLimit or MemoryResourceLimit).
func (m *Metrics) RegisterSkippedScaleEvent(direction, reason string) {
	m.extra.skippedScaleEvents.WithLabelValues(direction, reason).Inc()
}

// UpdatePendingNodeDeletions sets pending_node_deletions.
func (m *Metrics) UpdatePendingNodeDeletions(n int) { m.extra.pendingNodeDeletions.Set(float64(n)) }

// UpdateOverflowingControllers sets overflowing_controllers_count.
func (m *Metrics) UpdateOverflowingControllers(n int) { m.extra.overflowingControls.Set(float64(n)) }

// UpdateMaxNodeSkipEval sets max_node_skip_eval_duration_seconds.
func (m *Metrics) UpdateMaxNodeSkipEval(d time.Duration) { m.extra.maxNodeSkipEval.Set(d.Seconds()) }

// ObserveBinpackingHeterogeneity records one binpacking of groups pod
// equivalence groups from namespaces namespaces on template.
func (m *Metrics) ObserveBinpackingHeterogeneity(template *apiv1.Node, namespaces, groups int) {
	instanceType, cpus := "", ""
	if template != nil {
		instanceType = template.Labels[apiv1.LabelInstanceTypeStable]
		if q, ok := template.Status.Capacity[apiv1.ResourceCPU]; ok {
			cpus = strconv.FormatInt(q.Value(), 10)
		}
	}
	m.extra.binpackingHetero.WithLabelValues(instanceType, cpus, strconv.Itoa(namespaces)).Observe(float64(groups))
}

// RegisterNodeGroupCreation and RegisterNodeGroupDeletion count node groups
// created and deleted by node auto-provisioning, which no provider of this
// build offers yet.
func (m *Metrics) RegisterNodeGroupCreation(groupType string) {
	m.extra.createdNodeGroups.WithLabelValues(groupType).Inc()
}

// RegisterNodeGroupDeletion: see RegisterNodeGroupCreation.
func (m *Metrics) RegisterNodeGroupDeletion(groupType string) {
	m.extra.deletedNodeGroups.WithLabelValues(groupType).Inc()
}

// The taint types of node_taints_count, upstream's.
const (
	TaintTypeStartup = "startup-taint"
	TaintTypeStatus  = "status-taint"
	TaintTypeOther   = "other"
)

// namedTaintTypes are the taint keys node_taints_count names as they are.
var namedTaintTypes = map[string]bool{
	"ToBeDeletedByClusterAutoscaler":                 true,
	"DeletionCandidateOfClusterAutoscaler":           true,
	apiv1.TaintNodeNotReady:                          true,
	apiv1.TaintNodeUnreachable:                       true,
	apiv1.TaintNodeUnschedulable:                     true,
	apiv1.TaintNodeMemoryPressure:                    true,
	apiv1.TaintNodeDiskPressure:                      true,
	apiv1.TaintNodeNetworkUnavailable:                true,
	apiv1.TaintNodePIDPressure:                       true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	"node.cloudprovider.kubernetes.io/shutdown":      true,
	"cloud.google.com/impending-node-termination":    true,
	"NodeWithImpairedVolumes":                        true,
}

// TaintKinds says which taint keys are startup and status taints
// (--startup-taint, --startup-taint-prefix, --ignore-taint, --status-taint).
type TaintKinds struct {
	Startup, StartupPrefixes, Status []string
}

func (k TaintKinds) typeOf(key string) string {
	switch {
	case namedTaintTypes[key]:
		return key
	case strings.HasPrefix(key, taints.IgnorePrefix):
		return taints.IgnorePrefix
	case strings.HasPrefix(key, taints.StartupPrefix) || contains(k.Startup, key) || hasAnyPrefix(key, k.StartupPrefixes):
		return TaintTypeStartup
	case strings.HasPrefix(key, taints.StatusPrefix) || contains(k.Status, key):
		return TaintTypeStatus
	}
	return TaintTypeOther
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// UpdateNodeTaintsCount sets node_taints_count from the nodes' taints;
// types seen before and absent now go to zero.
func (m *Metrics) UpdateNodeTaintsCount(nodes []*apiv1.Node, kinds TaintKinds) {
	counts := map[string]int{}
	for _, n := range nodes {
		for _, t := range n.Spec.Taints {
			counts[kinds.typeOf(t.Key)]++
		}
	}
	e := m.extra
	e.mu.Lock()
	defer e.mu.Unlock()
	for typ := range e.knownTaintTypes {
		if _, ok := counts[typ]; !ok {
			e.nodeTaints.WithLabelValues(typ).Set(0)
		}
	}
	for typ, c := range counts {
		e.knownTaintTypes[typ] = true
		e.nodeTaints.WithLabelValues(typ).Set(float64(c))
	}
}
