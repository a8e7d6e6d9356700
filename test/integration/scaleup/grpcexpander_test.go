package scaleup

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/certs"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// buildCommand builds the main package pkg (relative to the repository
// root) into the test's temporary directory.
func buildCommand(t *testing.T, pkg string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if err := framework.GoBuild(root, bin, "./"+pkg, false); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startPriceServer runs the example expander server over TLS in mode.
func startPriceServer(t *testing.T, bin string, f certs.Files, mode string) string {
	t.Helper()
	addr := framework.FreeAddress(t)
	cmd := exec.Command(bin, "--address="+addr, "--cert="+f.ServerCert, "--key="+f.ServerKey, "--mode="+mode)
	log := &framework.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("priceserver log:\n%s", log.String())
		}
	})
	return addr
}

// TestGRPCExpander: the real binary with --expander=grpc talks TLS to the
// example price server, which prefers the cheaper large group where
// least-waste would take the small one; a server that fails makes the
// scale-up fall back to least-waste, counted in
// cluster_autoscaler_expander_fallbacks_total.
func TestGRPCExpander(t *testing.T) {
	server := buildCommand(t, "expander/grpc/examples/priceserver")
	f := certs.Write(t, t.TempDir())
	for _, tc := range []struct {
		mode, wantGroup, reason string
	}{
		{mode: "ok", wantGroup: "large"},
		{mode: "error", wantGroup: "small", reason: "error"},
		{mode: "hang", wantGroup: "small", reason: "timeout"},
		{mode: "empty", wantGroup: "small", reason: "empty"},
		{mode: "unknown", wantGroup: "small", reason: "unknown-node-group"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			e := framework.New(t)
			small, large := framework.UniqueName("small"), framework.UniqueName("large")
			path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, price: "5"}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, price: "1"}
    capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, small, large, framework.TestNamespaceLabel, e.Namespace))
			addr := startPriceServer(t, server, f, tc.mode)
			// Pinned to this test's groups: pods that earlier tests leave pending
			// while their namespaces go must not change the decision.
			itest.CreatePods(e, "web", 10, "1", map[string]string{framework.TestNamespaceLabel: e.Namespace})
			p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=grpc", "--grpc-expander-url="+addr,
				"--grpc-expander-cert="+f.CA, "--grpc-expander-timeout=1s")...)
			e.Eventually(60*time.Second, "a scale-up", func(context.Context) (bool, error) {
				return p.Log.Contains(`"Scaled up node group"`), nil
			})
			want := map[string]string{"small": small, "large": large}[tc.wantGroup]
			if !strings.Contains(itest.GrepLines(p.Log.String(), `"Scaled up node group"`), fmt.Sprintf("nodeGroup=%q", want)) {
				t.Errorf("mode %s: the scale-up did not go to the %s group %s", tc.mode, tc.wantGroup, want)
			}
			_, body, err := p.Get(e.Context(), "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			series := fmt.Sprintf(`cluster_autoscaler_expander_fallbacks_total{expander="grpc",reason=%q}`, tc.reason)
			switch {
			case tc.reason == "" && strings.Contains(body, "cluster_autoscaler_expander_fallbacks_total{"):
				t.Errorf("a fallback was counted although the server chose:\n%s", itest.GrepLines(body, "expander_fallbacks"))
			case tc.reason != "" && !strings.Contains(body, series):
				t.Errorf("/metrics lacks %s:\n%s", series, itest.GrepLines(body, "expander_fallbacks"))
			}
		})
	}
}
