package disruption

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// register registers c, or returns the collector already registered under
// its name (a second Healer in the same process shares the series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

type healMetrics struct {
	heals     *prometheus.CounterVec
	started   *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	unhealthy prometheus.Gauge
	hooks     *prometheus.HistogramVec
}

func newHealMetrics(reg prometheus.Registerer) *healMetrics {
	m := &healMetrics{
		heals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cluster_autoscaler", Name: "node_heals_total",
			Help: "Node heals ended, by result (succeeded, failed, cancelled, skipped) and reason."}, []string{"result", "reason"}),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cluster_autoscaler", Name: "node_heals_started_total",
			Help: "Node heals started, by trigger (annotation, or the condition type of the policy)."}, []string{"trigger"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "cluster_autoscaler", Name: "node_heal_duration_seconds",
			Help: "Time from the start of a heal to its end, by result.", Buckets: prometheus.ExponentialBuckets(5, 2, 10)}, []string{"result"}),
		unhealthy: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "cluster_autoscaler", Name: "unhealthy_nodes_count",
			Help: "Autoscaled nodes that need healing (a policy's condition held long enough, or the heal annotation), heals in flight included."}),
		hooks: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "cluster_autoscaler", Name: "node_heal_hook_duration_seconds",
			Help:    "Time the hooks of one heal phase took (they run outside the loop), by phase and result (ok, failed).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}, []string{"phase", "result"}),
	}
	if reg != nil {
		m.heals = register(reg, m.heals)
		m.started = register(reg, m.started)
		m.duration = register(reg, m.duration)
		m.unhealthy = register(reg, m.unhealthy)
		m.hooks = register(reg, m.hooks)
	}
	return m
}

// Actions of cluster_autoscaler_disruption_decisions_total.
const (
	ActionStarted          = "started"
	ActionSkippedBudget    = "skipped_budget"
	ActionSkippedProtected = "skipped_protected"
	// ActionSkippedBackoff: the candidate waits, its replacement's node
	// group backed off (Options.ReplacementHealth).
	ActionSkippedBackoff = "skipped_backoff"
	ActionCancelled      = "cancelled"
	ActionCompleted      = "completed"
	ActionFailed         = "failed"
)

type disruptionMetrics struct {
	decisions *prometheus.CounterVec
	nodes     *prometheus.GaugeVec
	saving    prometheus.Gauge
}

func newDisruptionMetrics(reg prometheus.Registerer) *disruptionMetrics {
	m := &disruptionMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cluster_autoscaler", Name: "disruption_decisions_total",
			Help: "Disruption decisions, by reason and action (started, skipped_budget, skipped_protected, skipped_backoff, cancelled, completed, failed)."},
			[]string{"reason", "action"}),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "cluster_autoscaler", Name: "disruption_nodes",
			Help: "Nodes being disrupted, by reason and phase."}, []string{"reason", "phase"}),
		saving: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "cluster_autoscaler", Name: "disruption_estimated_saving_per_hour",
			Help: "Estimated cost per hour saved by the disruptions in flight, summed (0 where unknown)."}),
	}
	if reg != nil {
		m.decisions = register(reg, m.decisions)
		m.nodes = register(reg, m.nodes)
		m.saving = register(reg, m.saving)
	}
	return m
}

// observe sets the gauges from the plans in flight.
func (h *Engine) observe(st *state) {
	h.dm.nodes.Reset()
	saving := 0.0
	for _, r := range st.Heals {
		h.dm.nodes.WithLabelValues(string(r.For), r.Phase).Add(float64(len(r.Nodes)))
		saving += r.SavingPerHour
	}
	for _, r := range st.ScaleDown {
		h.dm.nodes.WithLabelValues(string(r.For), r.Phase).Inc()
	}
	h.dm.saving.Set(saving)
}
