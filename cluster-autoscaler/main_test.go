package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{args: []string{"--version"}, code: 0, out: "cluster-autoscaler v"},
		{args: []string{"--help"}, code: 0, errOut: "--scale-down-unneeded-time"},
		{args: []string{"--predicate-parallelism=0"}, code: 2, errOut: "--predicate-parallelism: must be at least 1"},
		// Odd but accepted by upstream: a warning (config's tests), not a flag error.
		{args: []string{"--scale-down-utilization-threshold=2", "--cloud-provider=gce", "--address=127.0.0.1:0"}, code: 1},
		{args: []string{"--nodes=a:b:c"}, code: 2, errOut: "--nodes:"},
		{args: []string{"--explain-address=8087"}, code: 2, errOut: "--explain-address: want host:port"},
		{args: []string{"--explain-address=127.0.0.1:8085"}, code: 2, errOut: "--explain-address: \"127.0.0.1:8085\" has the port of --address"},
		// No API server: a clear error and exit 1, not a crash.
		{args: []string{"--cloud-provider=kwok", "--kubeconfig=/nonexistent/kubeconfig", "--address=127.0.0.1:0"}, code: 1},
		// A provider this build does not ship: exit 1 before touching anything.
		{args: []string{"--cloud-provider=gce", "--address=127.0.0.1:0"}, code: 1},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%v: exit code %d, want %d; stderr:\n%s", tc.args, code, tc.code, stderr.String())
		}
		if !strings.Contains(stdout.String(), tc.out) {
			t.Errorf("%v: stdout %q lacks %q", tc.args, stdout.String(), tc.out)
		}
		if !strings.Contains(stderr.String(), tc.errOut) {
			t.Errorf("%v: stderr lacks %q:\n%s", tc.args, tc.errOut, stderr.String())
		}
	}
}
