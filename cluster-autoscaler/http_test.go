package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/core"
)

// TestExplainzIsPrivateByDefault: /explainz is served on the listener of
// --explain-address only (loopback unless set otherwise), the metrics port
// answers 404 for it unless --explain-on-metrics-port, and
// --explain-address="" opens no listener of its own.
func TestExplainzIsPrivateByDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// Status of GET /explainz on --address and on --explain-address
		// (0: no such listener); 503: served, before the first loop.
		metrics, own int
	}{
		{name: "defaults", metrics: http.StatusNotFound, own: http.StatusServiceUnavailable},
		{name: "on the metrics port too", args: []string{"--explain-on-metrics-port"},
			metrics: http.StatusServiceUnavailable, own: http.StatusServiceUnavailable},
		{name: "no listener of its own", args: []string{"--explain-address="}, metrics: http.StatusNotFound},
		{name: "only on the metrics port", args: []string{"--explain-address=", "--explain-on-metrics-port"},
			metrics: http.StatusServiceUnavailable},
		{name: "explainer off", args: []string{"--explain-enabled=false", "--explain-on-metrics-port"},
			metrics: http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCommandLine()
			args := []string{"--address=127.0.0.1:0"}
			if c.opts.ExplainAddress != "" {
				// The default's host with a free port: parallel tests
				// cannot share 8087.
				host, _, err := net.SplitHostPort(c.opts.ExplainAddress)
				if err != nil || !net.ParseIP(host).IsLoopback() {
					t.Fatalf("default --explain-address %q is not loopback (%v)", c.opts.ExplainAddress, err)
				}
				args = append(args, "--explain-address="+net.JoinHostPort(host, "0"))
			}
			if err := c.parse(append(args, tc.args...)); err != nil {
				t.Fatal(err)
			}
			health := core.NewHealthCheck(clock.RealClock{}, c.opts.MaxInactivity, c.opts.MaxFailingTime, c.opts.MaxStartupTime)
			s, err := serveHTTP(klog.Background(), c.opts, prometheus.NewRegistry(), health, nil, newExplainer(c.opts))
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
	c := newCommandLine()
	if err := c.parse([]string{"--address=" + metrics, "--explain-address=" + taken.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	_, err = serveHTTP(klog.Background(), c.opts, prometheus.NewRegistry(), http.NotFoundHandler(), nil, newExplainer(c.opts))
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
