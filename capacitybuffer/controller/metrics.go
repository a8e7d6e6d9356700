package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
)

// OldestReconciliationMetric is upstream's name of the controller's gauge.
const OldestReconciliationMetric = "cluster_autoscaler_capacity_buffer_oldest_reconciliation_timestamp_seconds"

var oldestReconciliationDesc = prometheus.NewDesc(OldestReconciliationMetric,
	"Unix time of the oldest last reconciliation of a CapacityBuffer: new_buffer=\"true\" for buffers never reconciled "+
		"(their creation time), \"false\" for the others; the current time when there is none.",
	[]string{"new_buffer"}, nil)

// Collector returns the collector of the reconciliation gauge: register it
// on the metrics registry. Each scrape reads the buffers from the cache. A
// buffer this process never reconciled counts as new, at its creation time,
// when it has no condition yet; one with conditions was reconciled by an
// earlier process and is left out until this one reconciles it.
func (c *Controller) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Controller }

func (m collector) Describe(ch chan<- *prometheus.Desc) { ch <- oldestReconciliationDesc }

func (m collector) Collect(ch chan<- prometheus.Metric) {
	now := m.c.clock.Now()
	oldestNew, oldestDone := now, now
	if buffers, err := m.c.buffers.List(); err == nil {
		m.c.mu.Lock()
		for _, b := range buffers {
			if !capacitybuffer.Handled(b) {
				continue
			}
			if t, ok := m.c.reconciled[b.UID]; ok {
				oldestDone = earlier(oldestDone, t)
			} else if len(b.Status.Conditions) == 0 {
				oldestNew = earlier(oldestNew, b.CreationTimestamp.Time)
			}
		}
		m.c.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(oldestReconciliationDesc, prometheus.GaugeValue, float64(oldestNew.Unix()), "true")
	ch <- prometheus.MustNewConstMetric(oldestReconciliationDesc, prometheus.GaugeValue, float64(oldestDone.Unix()), "false")
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
