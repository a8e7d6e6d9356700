package builder

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/config"
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

// newMux is the handler of --address. explainer, when set, is served there
// too (--explain-on-metrics-port).
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

// newExplainMux is the handler of --explain-address: /explainz only.
func newExplainMux(explainer *explain.Recorder) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/explainz", explainer.Handler())
	return mux
}

// newExplainer is the loop's recorder of reasons, or nil when nothing would
// serve it: --explain-enabled=false, or neither --explain-address nor
// --explain-on-metrics-port.
func newExplainer(opts config.Options) *explain.Recorder {
	if !opts.ExplainEnabled || (opts.ExplainAddress == "" && !opts.ExplainOnMetricsPort) {
		return nil
	}
	return explain.NewRecorder()
}

// httpServers are the process's listeners: --address, and --explain-address
// when the explainer has a listener of its own.
type httpServers struct {
	servers []*http.Server
	// addresses are the servers' listening addresses, --address first.
	addresses []string
	// errs receives each server's end (http.ErrServerClosed after
	// shutdown).
	errs chan error
}

// serveHTTP listens on --address (metrics, health, the debugging paths and,
// with --explain-on-metrics-port, /explainz) and, when explainer is set and
// --explain-address is not "", on --explain-address (/explainz only). A
// listener that cannot be opened is an error naming its flag.
func serveHTTP(logger klog.Logger, opts config.Options, gatherer prometheus.Gatherer, health http.Handler,
	snapshots *core.Snapshotter, explainer *explain.Recorder) (*httpServers, error) {
	type endpoint struct {
		flag, address string
		handler       http.Handler
	}
	var onMetricsPort *explain.Recorder
	if opts.ExplainOnMetricsPort {
		onMetricsPort = explainer
	}
	endpoints := []endpoint{{"--address", opts.Address, newMux(gatherer, health, opts.Profiling, snapshots, onMetricsPort)}}
	if explainer != nil && opts.ExplainAddress != "" {
		endpoints = append(endpoints, endpoint{"--explain-address", opts.ExplainAddress, newExplainMux(explainer)})
	}
	var listeners []net.Listener
	for _, e := range endpoints {
		l, err := net.Listen("tcp", e.address)
		if err != nil {
			for _, open := range listeners {
				_ = open.Close()
			}
			return nil, fmt.Errorf("%s %q: %w", e.flag, e.address, err)
		}
		listeners = append(listeners, l)
	}
	s := &httpServers{errs: make(chan error, len(endpoints))}
	for i, e := range endpoints {
		server := &http.Server{Handler: e.handler, ReadHeaderTimeout: 10 * time.Second}
		s.servers = append(s.servers, server)
		s.addresses = append(s.addresses, listeners[i].Addr().String())
		go func(l net.Listener) { s.errs <- server.Serve(l) }(listeners[i])
		switch e.flag {
		case "--address":
			logger.Info("Serving metrics and health", "address", listeners[i].Addr().String(),
				"explainz", explainer != nil && opts.ExplainOnMetricsPort)
		default:
			logger.Info("Serving /explainz", "address", listeners[i].Addr().String())
		}
	}
	return s, nil
}

// failed receives the first error of a server that stopped on its own; it
// is closed once every server has stopped without one.
func (s *httpServers) failed() <-chan error {
	out := make(chan error, 1)
	go func() {
		defer close(out)
		for range s.servers {
			if err := <-s.errs; err != nil && !errors.Is(err, http.ErrServerClosed) {
				out <- err
				return
			}
		}
	}()
	return out
}

// shutdown stops every server, waiting at most 5 s for requests in flight.
func (s *httpServers) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, server := range s.servers {
		_ = server.Shutdown(ctx)
	}
}
