package builder

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
)

// TestExplainzIsPrivateByDefault: /explainz is served on the listener of
// --explain-address only (loopback unless set otherwise), the metrics port
// answers 404 for it unless --explain-on-metrics-port, and
// --explain-address="" opens no listener of its own.
func TestExplainzIsPrivateByDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*config.Options)
		// Status of GET /explainz on --address and on --explain-address
		// (0: no such listener); 503: served, before the first loop.
		metrics, own int
	}{
		{name: "defaults", metrics: http.StatusNotFound, own: http.StatusServiceUnavailable},
		{name: "on the metrics port too", set: func(o *config.Options) { o.ExplainOnMetricsPort = true },
			metrics: http.StatusServiceUnavailable, own: http.StatusServiceUnavailable},
		{name: "no listener of its own", set: func(o *config.Options) { o.ExplainAddress = "" }, metrics: http.StatusNotFound},
		{name: "only on the metrics port", set: func(o *config.Options) { o.ExplainAddress, o.ExplainOnMetricsPort = "", true },
			metrics: http.StatusServiceUnavailable},
		{name: "explainer off", set: func(o *config.Options) { o.ExplainEnabled, o.ExplainOnMetricsPort = false, true },
			metrics: http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := config.Defaults()
			opts.Address = "127.0.0.1:0"
			if opts.ExplainAddress != "" {
				// The default's host with a free port: parallel tests
				// cannot share 8087.
				host, _, err := net.SplitHostPort(opts.ExplainAddress)
				if err != nil || !net.ParseIP(host).IsLoopback() {
					t.Fatalf("default --explain-address %q is not loopback (%v)", opts.ExplainAddress, err)
				}
				opts.ExplainAddress = net.JoinHostPort(host, "0")
			}
			if tc.set != nil {
				tc.set(&opts)
			}
			health := core.NewHealthCheck(clock.RealClock{}, opts.MaxInactivity, opts.MaxFailingTime, opts.MaxStartupTime)
			s, err := serveHTTP(klog.Background(), opts, prometheus.NewRegistry(), health, nil, newExplainer(opts))
			if err != nil {
				t.Fatal(err)
			}
			defer s.shutdown()
			if got := status(t, s.addresses[0], "/explainz?pod=ns/p"); got != tc.metrics {
				t.Errorf("/explainz on --address: %d, want %d", got, tc.metrics)
			}
			if got := status(t, s.addresses[0], "/metrics"); got != http.StatusOK {
				t.Errorf("/metrics on --address: %d, want 200", got)
			}
			if tc.own == 0 {
				if len(s.addresses) != 1 {
					t.Errorf("listeners %v, want only --address", s.addresses)
				}
				return
			}
			if len(s.addresses) != 2 {
				t.Fatalf("listeners %v, want --address and --explain-address", s.addresses)
			}
			if ip := net.ParseIP(hostOf(t, s.addresses[1])); ip == nil || !ip.IsLoopback() {
				t.Errorf("--explain-address listens on %s, want loopback", s.addresses[1])
			}
			if got := status(t, s.addresses[1], "/explainz?pod=ns/p"); got != tc.own {
				t.Errorf("/explainz on --explain-address: %d, want %d", got, tc.own)
			}
			for _, path := range []string{"/metrics", "/health-check", "/snapshotz"} {
				if got := status(t, s.addresses[1], path); got != http.StatusNotFound {
					t.Errorf("%s on --explain-address: %d, want 404 (it serves /explainz only)", path, got)
				}
			}
		})
	}
}

// TestExplainAddressInUse: a listener that cannot be opened is a start-up
// error naming --explain-address, and --address is released again.
func TestExplainAddressInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := free.Addr().String()
	_ = free.Close()
	opts := config.Defaults()
	opts.Address, opts.ExplainAddress = metrics, taken.Addr().String()
	_, err = serveHTTP(klog.Background(), opts, prometheus.NewRegistry(), http.NotFoundHandler(), nil, newExplainer(opts))
	if err == nil || !strings.HasPrefix(err.Error(), "--explain-address ") {
		t.Errorf("error %v, want one starting with --explain-address", err)
	}
	again, err := net.Listen("tcp", metrics)
	if err != nil {
		t.Fatalf("--address %s still held: %v", metrics, err)
	}
	_ = again.Close()
}

func hostOf(t *testing.T, address string) string {
	t.Helper()
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		t.Fatal(err)
	}
	return host
}

func status(t *testing.T, address, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + address + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", address, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
