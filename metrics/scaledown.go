package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scaleDownMetrics are scale-down's series, with upstream's names.
type scaleDownMetrics struct {
	scaledDown     *prometheus.CounterVec
	evicted        *prometheus.CounterVec
	unneeded       prometheus.Gauge
	unremovable    *prometheus.GaugeVec
	inCooldown     prometheus.Gauge
	removalLatency *prometheus.HistogramVec
	knownReasons   map[string]bool
}

func newScaleDownMetrics() *scaleDownMetrics {
	return &scaleDownMetrics{
		scaledDown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "scaled_down_nodes_total",
			Help: "Nodes removed by scale-down, by reason (empty, underutilized, unready).",
		}, []string{"reason", "gpu_resource_name", "gpu_name", "dra_drivers"}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "evicted_pods_total",
			Help: "Pods evicted by scale-down, by result.",
		}, []string{"eviction_result"}),
		unneeded: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "unneeded_nodes_count",
			Help: "Nodes the cluster does not need now (scale-down candidates).",
		}),
		unremovable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "unremovable_nodes_count",
			Help: "Nodes that cannot be removed, by reason.",
		}, []string{"reason"}),
		inCooldown: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "scale_down_in_cooldown",
			Help: "1 while scale-down waits after a scale-up, a deletion or a failure, else 0.",
		}),
		removalLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "node_removal_latency_seconds",
			Help:    "Time from a node becoming unneeded to its removal (deleted=true) or to its removal being called off (deleted=false).",
			Buckets: prometheus.ExponentialBuckets(1, 1.5, 19), // about 1s to 24min, as upstream
		}, []string{"deleted", "delay_reason"}),
		knownReasons: map[string]bool{},
	}
}

func (s *scaleDownMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.scaledDown, s.evicted, s.unneeded, s.unremovable, s.inCooldown, s.removalLatency}
}

// RegisterEvictions counts pod evictions.
func (m *Metrics) RegisterEvictions(succeeded, failed int) {
	m.scaleDown.evicted.WithLabelValues("succeeded").Add(float64(succeeded))
	m.scaleDown.evicted.WithLabelValues("failed").Add(float64(failed))
}

// ObserveNodeRemoval times a node's removal since it became unneeded. The
// delay_reason label is upstream's "none": removals here are not delayed
// by a reason upstream names.
func (m *Metrics) ObserveNodeRemoval(deleted bool, sinceUnneeded time.Duration) {
	m.scaleDown.removalLatency.WithLabelValues(strconv.FormatBool(deleted), "none").Observe(sinceUnneeded.Seconds())
}

// UpdateUnneededNodesCount sets unneeded_nodes_count.
func (m *Metrics) UpdateUnneededNodesCount(n int) { m.scaleDown.unneeded.Set(float64(n)) }

// UpdateUnremovableNodesCount sets unremovable_nodes_count per reason;
// reasons seen before and absent now go to zero. The label is the reason's
// number, as upstream exports it (see UnremovableReasonLabel).
func (m *Metrics) UpdateUnremovableNodesCount(byReason map[string]int) {
	s := m.scaleDown
	counts := map[string]int{}
	for r, n := range byReason {
		counts[UnremovableReasonLabel(r)] += n
	}
	for r := range s.knownReasons {
		if _, ok := counts[r]; !ok {
			s.unremovable.WithLabelValues(r).Set(0)
		}
	}
	for r, n := range counts {
		s.knownReasons[r] = true
		s.unremovable.WithLabelValues(r).Set(float64(n))
	}
}

// upstreamUnremovableReasons are upstream's unremovable reasons in the
// order of their enum: upstream formats the enum's integer into the
// reason label ("0", "1", ...), so dashboards match on these numbers.
var upstreamUnremovableReasons = []string{
	"NoReason", "ScaleDownDisabledAnnotation", "ScaleDownUnreadyDisabled", "NotAutoscaled",
	"NotUnneededLongEnough", "NotUnreadyLongEnough", "NodeGroupMinSizeReached", "NodeGroupMaxDeletionCountReached",
	"AtomicScaleDownFailed", "MinimalResourceLimitExceeded", "CurrentlyBeingDeleted", "NotUnderutilized",
	"NotUnneededOtherReason", "RecentlyUnremovable", "NoPlaceToMovePods", "BlockedByPod", "UnexpectedError",
	"NoNodeInfo", "BlockedByOnCompletionPod",
}

// reasonAliases map this autoscaler's own reasons to upstream's nearest:
// a node kept for booked capacity, or because its group blocks scale-down
// (upstream leaves those out of the count), is not unneeded for another
// reason; a node not started yet is unready, not for long enough.
var reasonAliases = map[string]string{"BookedCapacity": "NotUnneededOtherReason", "NodeGroupScaleDownBlocked": "NotUnneededOtherReason",
	"NotStarted": "NotUnreadyLongEnough"}

// UnremovableReasonLabel is the unremovable_nodes_count label of a
// scale-down reason name: upstream's enum number ("NoReason" = "0" for a
// name upstream does not have).
func UnremovableReasonLabel(reason string) string {
	if a, ok := reasonAliases[reason]; ok {
		reason = a
	}
	for i, r := range upstreamUnremovableReasons {
		if r == reason {
			return strconv.Itoa(i)
		}
	}
	return "0"
}

// UpdateScaleDownInCooldown sets scale_down_in_cooldown.
func (m *Metrics) UpdateScaleDownInCooldown(in bool) {
	v := 0.0
	if in {
		v = 1
	}
	m.scaleDown.inCooldown.Set(v)
}
