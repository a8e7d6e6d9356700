package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/component-base/metrics/legacyregistry"

	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
)

// metricsGatherer serves the autoscaler's own series (registry) with
// component-base's legacy registry, as upstream does: the Go runtime and
// process collectors, component-base's own series and client-go's
// rest_client_* series, which client-go can only report to one process-wide
// sink (package restclient registers it at import).
func metricsGatherer(registry *prometheus.Registry) prometheus.Gatherer {
	return prometheus.Gatherers{registry, legacyregistry.DefaultGatherer}
}

func newMux(gatherer prometheus.Gatherer, health http.Handler, profiling bool, snapshots *core.Snapshotter,
	explainer *explain.Recorder) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.Handle("/health-check", health)
	if snapshots != nil {
		mux.Handle("/snapshotz", snapshots)
	}
	if explainer != nil {
		mux.Handle("/explainz", explainer.Handler())
	}
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
