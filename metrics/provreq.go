package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// provreqMetrics are the ProvisioningRequest series. Upstream exports none;
// the names follow its conventions.
type provreqMetrics struct {
	requests         *prometheus.GaugeVec
	timeToAccepted   *prometheus.HistogramVec
	timeToProvision  *prometheus.HistogramVec
	transitions      *prometheus.CounterVec
	bookedPods       prometheus.Gauge
	knownStateLabels map[[2]string]bool
}

func newProvreqMetrics() *provreqMetrics {
	buckets := prometheus.ExponentialBucketsRange(1, 7*24*3600, 30)
	return &provreqMetrics{
		requests: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "provisioning_requests",
			Help: "ProvisioningRequests the autoscaler handles, by class and state (accepted, provisioned, failed, bookingExpired, revoked).",
		}, []string{"class", "state"}),
		timeToAccepted: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "provisioning_request_accepted_seconds",
			Help: "Time from a ProvisioningRequest's creation to Accepted=True.", Buckets: buckets,
		}, []string{"class"}),
		timeToProvision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "provisioning_request_provisioned_seconds",
			Help: "Time from a ProvisioningRequest's creation to Provisioned=True.", Buckets: buckets,
		}, []string{"class"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "provisioning_request_transitions_total",
			Help: "ProvisioningRequest condition changes, by class, condition, status and reason.",
		}, []string{"class", "condition", "status", "reason"}),
		bookedPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "provisioning_request_booked_pods",
			Help: "Pods whose capacity provisioned ProvisioningRequests keep booked.",
		}),
		knownStateLabels: map[[2]string]bool{},
	}
}

func (p *provreqMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.requests, p.timeToAccepted, p.timeToProvision, p.transitions, p.bookedPods}
}

// Transition counts a ProvisioningRequest condition change and times the
// first Accepted and Provisioned.
func (m *Metrics) Transition(class, condition, status, reason string, sinceCreation time.Duration) {
	p := m.provreq
	p.transitions.WithLabelValues(class, condition, status, reason).Inc()
	if status != "True" {
		return
	}
	switch condition {
	case "Accepted":
		p.timeToAccepted.WithLabelValues(class).Observe(sinceCreation.Seconds())
	case "Provisioned":
		p.timeToProvision.WithLabelValues(class).Observe(sinceCreation.Seconds())
	}
}

// Requests sets the number of ProvisioningRequests by class and state;
// states seen before and absent now go to zero.
func (m *Metrics) Requests(counts map[[2]string]int) {
	p := m.provreq
	for k := range p.knownStateLabels {
		if _, ok := counts[k]; !ok {
			p.requests.WithLabelValues(k[0], k[1]).Set(0)
		}
	}
	for k, n := range counts {
		p.knownStateLabels[k] = true
		p.requests.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}

// BookedPods sets the number of pods with booked capacity.
func (m *Metrics) BookedPods(n int) { m.provreq.bookedPods.Set(float64(n)) }
