package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// dra_node_template_resources_mismatch holds the last loop's counts only.
func TestDRATemplateMismatchesAreTheLastLoops(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	read := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range gather(t, reg)["cluster_autoscaler_dra_node_template_resources_mismatch"].GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["driver"]+"/"+l["mismatch_type"]] = s.GetGauge().GetValue()
		}
		return out
	}
	m.UpdateDRATemplateMismatches(map[DRAMismatch]int{{"gpu.example.com", "mismatch"}: 2, {"dra.net", "extra"}: 1})
	if diff := cmp.Diff(map[string]float64{"gpu.example.com/mismatch": 2, "dra.net/extra": 1}, read()); diff != "" {
		t.Errorf("first loop (-want +got):\n%s", diff)
	}
	m.UpdateDRATemplateMismatches(map[DRAMismatch]int{{"dra.net", "missing"}: 3})
	if diff := cmp.Diff(map[string]float64{"dra.net/missing": 3}, read()); diff != "" {
		t.Errorf("second loop (-want +got):\n%s", diff)
	}
}
