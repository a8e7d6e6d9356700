package metrics

import "github.com/prometheus/client_golang/prometheus"

// DRAMismatch is one series of dra_node_template_resources_mismatch: a
// DRA driver and the kind of difference (missing, extra, mismatch,
// unknown), upstream's labels.
type DRAMismatch struct {
	Driver, Type string
}

func newDRATemplateMismatch() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "dra_node_template_resources_mismatch",
		Help: "Resource pools in which a ready node's ResourceSlices differ from those its node group's template predicted, by driver and kind of difference."},
		[]string{"driver", "mismatch_type"})
}

// UpdateDRATemplateMismatches sets dra_node_template_resources_mismatch to
// this loop's counts; series of earlier loops not in counts are dropped.
func (m *Metrics) UpdateDRATemplateMismatches(counts map[DRAMismatch]int) {
	m.draTemplateMismatch.Reset()
	for k, n := range counts {
		m.draTemplateMismatch.WithLabelValues(k.Driver, k.Type).Set(float64(n))
	}
}
