package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// TestAggregatedDurationsFlushOncePerLoop: the durations of a loop are
// summed per function and observed once at the flush; the next loop starts
// from zero and a function not timed in it is not observed again.
func TestAggregatedDurationsFlushOncePerLoop(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.AddAggregatedDuration(AggregatedDRASnapshotFork, 100*time.Millisecond)
	m.AddAggregatedDuration(AggregatedDRASnapshotFork, 200*time.Millisecond)
	m.AddAggregatedDuration(AggregatedDRASnapshotRevert, 50*time.Millisecond)
	m.FlushAggregatedDurations()
	m.AddAggregatedDuration(AggregatedDRASnapshotFork, time.Second)
	m.FlushAggregatedDurations()
	m.FlushAggregatedDurations() // an idle loop observes nothing

	type obs struct {
		Count uint64
		Sum   float64
	}
	got := map[string]obs{}
	f := gather(t, reg)["cluster_autoscaler_function_aggregated_duration_seconds"]
	if f == nil {
		t.Fatal("family not exported")
	}
	for _, mt := range f.GetMetric() {
		h := mt.GetHistogram()
		got[mt.GetLabel()[0].GetValue()] = obs{Count: h.GetSampleCount(), Sum: h.GetSampleSum()}
	}
	want := map[string]obs{
		AggregatedDRASnapshotFork:   {Count: 2, Sum: 1.3},
		AggregatedDRASnapshotRevert: {Count: 1, Sum: 0.05},
	}
	approx := cmp.Comparer(func(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 })
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("observations (-want +got):\n%s", diff)
	}
}
