package metrics

import "github.com/prometheus/client_golang/prometheus"

// SkippedPodsFilterOutSchedulable is the requestor of skipped_pods_count
// for the pods whose check against the existing and upcoming nodes was cut
// short by --pending-pods-batching-timeout (upstream's value).
const SkippedPodsFilterOutSchedulable = "filter-out-pod-list-processor"

func newSkippedPods() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "skipped_pods_count",
		Help: "Pending pods whose scheduling simulation was skipped in the last loop, by the part of the loop that skipped them."},
		[]string{"requestor"})
}

// UpdateSkippedPods sets skipped_pods_count for requestor.
func (m *Metrics) UpdateSkippedPods(requestor string, n int) {
	m.skippedPods.WithLabelValues(requestor).Set(float64(n))
}
