package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// nodes_count has upstream's six states, suspended included.
func TestNodesCountStates(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.UpdateNodesCount(5, 1, 2, 3, 4, 6)
	got := map[string]float64{}
	for _, s := range gather(t, reg)["cluster_autoscaler_nodes_count"].GetMetric() {
		got[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
	}
	want := map[string]float64{"ready": 5, "unready": 1, "notStarted": 2, "suspended": 3, "unregistered": 4,
		"longUnregistered": 6}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes_count (-want +got):\n%s", diff)
	}
}
