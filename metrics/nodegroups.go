package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// nodeGroupMetrics are the per-node-group series of
// --emit-per-nodegroup-metrics, with upstream's names.
type nodeGroupMetrics struct {
	min, max, target, healthiness *prometheus.GaugeVec
	backoff                       *prometheus.GaugeVec
	mu                            sync.Mutex
	seenReasons                   map[string]map[string]bool // group -> back-off reasons seen
}

func newNodeGroupMetrics() *nodeGroupMetrics {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	return &nodeGroupMetrics{
		min:         gauge("node_group_min_count", "Minimum size of a node group.", "node_group"),
		max:         gauge("node_group_max_count", "Maximum size of a node group.", "node_group"),
		target:      gauge("node_group_target_count", "Target size of a node group.", "node_group"),
		healthiness: gauge("node_group_healthiness", "1 when a node group is healthy, else 0.", "node_group"),
		backoff: gauge("node_group_backoff_status", "1 while a node group is backed off for the reason, else 0.",
			"node_group", "reason"),
		seenReasons: map[string]map[string]bool{},
	}
}

func (n *nodeGroupMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{n.min, n.max, n.target, n.healthiness, n.backoff}
}

// UpdateNodeGroup sets one node group's series. backoffReason is the
// back-off's error code, "" when not backed off.
func (m *Metrics) UpdateNodeGroup(group string, minSize, maxSize, target int, healthy, backedOff bool, backoffReason string) {
	n := m.nodeGroups
	n.min.WithLabelValues(group).Set(float64(minSize))
	n.max.WithLabelValues(group).Set(float64(maxSize))
	n.target.WithLabelValues(group).Set(float64(target))
	h := 0.0
	if healthy {
		h = 1
	}
	n.healthiness.WithLabelValues(group).Set(h)
	n.mu.Lock()
	defer n.mu.Unlock()
	seen := n.seenReasons[group]
	if seen == nil {
		seen = map[string]bool{}
		n.seenReasons[group] = seen
	}
	if backedOff && backoffReason == "" {
		backoffReason = "unknown"
	}
	for r := range seen {
		if !backedOff || r != backoffReason {
			n.backoff.WithLabelValues(group, r).Set(0)
		}
	}
	switch {
	case backedOff:
		seen[backoffReason] = true
		n.backoff.WithLabelValues(group, backoffReason).Set(1)
	case len(seen) == 0:
		n.backoff.WithLabelValues(group, "").Set(0)
	}
}
