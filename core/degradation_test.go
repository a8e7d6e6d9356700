package core

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// Skipped pods set skipped_pods_count{requestor="filter-out-pod-list-processor"};
// the first loop that skips pods records GracefulDegradationStarted, the
// first that skips none after it GracefulDegradationStopped, as upstream.
func TestReportingGracefulDegradation(t *testing.T) {
	ctx := context.Background()
	rec := record.NewFakeRecorder(10)
	status := &apiv1.ObjectReference{Kind: "ConfigMap", Namespace: "kube-system", Name: "cluster-autoscaler-status"}
	reg := prometheus.NewRegistry()
	r := NewReporting(metrics.New(reg), fakeprovider.NewProvider(), rec, status)
	gauge := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "cluster_autoscaler_skipped_pods_count" {
				for _, m := range mf.GetMetric() {
					if m.GetLabel()[0].GetValue() == metrics.SkippedPodsFilterOutSchedulable {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatal("no skipped_pods_count series")
		return 0
	}
	var got []float64
	for _, n := range []int{0, 120, 80, 0, 0} {
		r.SkippedPods(ctx, n)
		got = append(got, gauge())
	}
	if diff := cmp.Diff([]float64{0, 120, 80, 0, 0}, got); diff != "" {
		t.Errorf("gauge (-want +got):\n%s", diff)
	}
	want := []string{
		"Warning GracefulDegradationStarted Graceful degradation started: 120 pending pods skipped, their check against existing and upcoming nodes ran out of --pending-pods-batching-timeout",
		"Normal GracefulDegradationStopped Graceful degradation stopped: no pending pod skipped",
	}
	if diff := cmp.Diff(want, drain(rec)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
