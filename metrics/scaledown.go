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
			Help:    "Time from a node becoming unneeded to its removal (deleted=true) or failed removal (deleted=false).",
			Buckets: prometheus.ExponentialBucketsRange(1, 24*3600, 30),
		}, []string{"deleted"}),
		knownReasons: map[string]bool{},
	}
}

func (s *scaleDownMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.scaledDown, s.evicted, s.unneeded, s.unremovable, s.inCooldown, s.removalLatency}
}

// RegisterScaleDown counts n nodes removed for reason.
func (m *Metrics) RegisterScaleDown(reason string, n int) {
	m.scaleDown.scaledDown.WithLabelValues(reason, "", "", "").Add(float64(n))
}

// RegisterEvictions counts pod evictions.
func (m *Metrics) RegisterEvictions(succeeded, failed int) {
	m.scaleDown.evicted.WithLabelValues("succeeded").Add(float64(succeeded))
	m.scaleDown.evicted.WithLabelValues("failed").Add(float64(failed))
}

// ObserveNodeRemoval times a node's removal since it became unneeded.
func (m *Metrics) ObserveNodeRemoval(deleted bool, sinceUnneeded time.Duration) {
	m.scaleDown.removalLatency.WithLabelValues(strconv.FormatBool(deleted)).Observe(sinceUnneeded.Seconds())
}

// UpdateUnneededNodesCount sets unneeded_nodes_count.
func (m *Metrics) UpdateUnneededNodesCount(n int) { m.scaleDown.unneeded.Set(float64(n)) }

// UpdateUnremovableNodesCount sets unremovable_nodes_count per reason;
// reasons seen before and absent now go to zero.
func (m *Metrics) UpdateUnremovableNodesCount(byReason map[string]int) {
	s := m.scaleDown
	for r := range s.knownReasons {
		if _, ok := byReason[r]; !ok {
			s.unremovable.WithLabelValues(r).Set(0)
		}
	}
	for r, n := range byReason {
		s.knownReasons[r] = true
		s.unremovable.WithLabelValues(r).Set(float64(n))
	}
}

// UpdateScaleDownInCooldown sets scale_down_in_cooldown.
func (m *Metrics) UpdateScaleDownInCooldown(in bool) {
	v := 0.0
	if in {
		v = 1
	}
	m.scaleDown.inCooldown.Set(v)
}
