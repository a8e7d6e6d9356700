package metrics

import "github.com/prometheus/client_golang/prometheus"

// newExpanderFallbacks is cluster_autoscaler_expander_fallbacks_total: the
// times an expander could not choose and another decided (not upstream).
func newExpanderFallbacks() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "expander_fallbacks_total",
		Help: "Times an expander could not choose (error, timeout, empty reply, unknown node group) and its fallback decided, by expander and reason.",
	}, []string{"expander", "reason"})
}

// ExpanderFallback counts one fallback of expander for reason.
func (m *Metrics) ExpanderFallback(expander, reason string) {
	m.expanderFallbacks.WithLabelValues(expander, reason).Inc()
}
