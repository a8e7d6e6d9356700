package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

func baseArgs(e *framework.Env) []string {
	return []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--namespace=" + e.Namespace,
		"--cloud-provider=kwok",
		"--nodes=0:3:ng",
		"--scan-interval=1s",
		"--v=2",
	}
}

// TestAutoscalerServesHealthAndMetrics runs the real binary against the real
// API server and reads its HTTP endpoints.
func TestAutoscalerServesHealthAndMetrics(t *testing.T) {
	e := framework.New(t)
	p := startAutoscaler(t, "autoscaler", baseArgs(e)...)

	e.Eventually(30*time.Second, "/health-check answers 200 and loops have run", func(ctx context.Context) (bool, error) {
		code, _, err := p.get(ctx, "/health-check")
		if err != nil || code != 200 {
			return false, nil
		}
		_, body, err := p.get(ctx, "/metrics")
		return err == nil && strings.Contains(body, `cluster_autoscaler_last_activity{activity="mainSuccessful"}`), nil
	})
	_, body, err := p.get(e.Context(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`cluster_autoscaler_last_activity{activity="main"}`,
		`cluster_autoscaler_errors_total{type="cloudProviderError"} 0`,
		`cluster_autoscaler_function_duration_seconds_bucket{function="main"`,
		`cluster_autoscaler_nodes_count{state="ready"}`,
		"cluster_autoscaler_max_nodes_count 3", // --nodes=0:3:ng
		`cluster_autoscaler_cpu_limits_cores{direction="maximum"} 320000`,
		`cluster_autoscaler_memory_limits_bytes{direction="maximum"} 6.8719476736e+15`,
		"cluster_autoscaler_cluster_cpu_current_cores ",
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _, _ := p.get(e.Context(), "/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ answered %d without --profiling, want 404", code)
	}
	if code := p.terminate(20 * time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

func leaderArgs(e *framework.Env) []string {
	return append(baseArgs(e),
		"--leader-elect=true",
		"--leader-elect-lease-duration=6s",
		"--leader-elect-renew-deadline=4s",
		"--leader-elect-retry-period=500ms",
	)
}

func lease(t *testing.T, e *framework.Env) *coordinationv1.Lease {
	t.Helper()
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Context(), "cluster-autoscaler", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	return l
}

const acquired = "Acquired the leader-election lease"

// TestLeaderElectionFailover: a second replica waits while the first holds the
// Lease (even when it names another --leader-elect-resource-namespace), and takes over within the lease duration once the first gets SIGTERM.
func TestLeaderElectionFailover(t *testing.T) {
	e := framework.New(t)
	first := startAutoscaler(t, "first", leaderArgs(e)...)
	e.Eventually(30*time.Second, "first replica leads", func(context.Context) (bool, error) {
		return first.log.Contains(acquired), nil
	})
	holder := *lease(t, e).Spec.HolderIdentity

	// The second replica names another namespace for the Lease: ignored, as
	// upstream, so both replicas still compete for the same Lease.
	second := startAutoscaler(t, "second", append(leaderArgs(e), "--leader-elect-resource-namespace=kube-system")...)
	e.Eventually(30*time.Second, "second replica waits for the lease", func(context.Context) (bool, error) {
		return second.log.Contains("Waiting for the leader-election lease"), nil
	})
	if !second.log.Contains("--leader-elect-resource-namespace is ignored") {
		t.Error("the ignored --leader-elect-resource-namespace is not warned about")
	}
	// Several renewals of the first replica pass; the second must still wait.
	time.Sleep(3 * time.Second)
	if second.log.Contains(acquired) {
		t.Fatal("second replica acquired the lease while the first held it")
	}
	if got := *lease(t, e).Spec.HolderIdentity; got != holder {
		t.Fatalf("lease holder changed from %s to %s while the first replica ran", holder, got)
	}
	// A standby replica is healthy: it must not be restarted for waiting.
	if code, _, err := second.get(e.Context(), "/health-check"); err != nil || code != 200 {
		t.Fatalf("standby /health-check = %d, %v; want 200", code, err)
	}

	stopped := time.Now()
	if code := first.terminate(20 * time.Second); code != 0 {
		t.Fatalf("first replica exit code after SIGTERM = %d, want 0", code)
	}
	e.Eventually(6*time.Second, "second replica takes over within the lease duration", func(context.Context) (bool, error) {
		return second.log.Contains(acquired), nil
	})
	t.Logf("takeover %v after SIGTERM", time.Since(stopped).Round(100*time.Millisecond))
	if got := *lease(t, e).Spec.HolderIdentity; got == holder {
		t.Fatalf("lease still held by the stopped replica %s", got)
	}
	e.Eventually(20*time.Second, "second replica runs loops", func(ctx context.Context) (bool, error) {
		_, body, err := second.get(ctx, "/metrics")
		return err == nil && strings.Contains(body, `cluster_autoscaler_last_activity{activity="mainSuccessful"}`), nil
	})
}

// TestLostLeaseStopsTheLoop: when another holder takes the Lease, the replica
// stops its loop and exits non-zero, so that its Deployment restarts it as a
// standby instead of two replicas scaling at once.
func TestLostLeaseStopsTheLoop(t *testing.T) {
	e := framework.New(t)
	p := startAutoscaler(t, "replica", leaderArgs(e)...)
	e.Eventually(30*time.Second, "replica leads", func(context.Context) (bool, error) {
		return p.log.Contains(acquired), nil
	})

	// Another holder takes the Lease with a long duration and keeps it.
	l := lease(t, e)
	intruder := "intruder"
	l.Spec.HolderIdentity = &intruder
	duration := int32(3600)
	l.Spec.LeaseDurationSeconds = &duration
	now := metav1.NewMicroTime(time.Now())
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Update(e.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("taking the Lease: %v", err)
	}
	if code := p.waitExit(20 * time.Second); code != 1 {
		t.Fatalf("exit code after losing the lease = %d, want 1", code)
	}
	if !p.log.Contains("lost the leader-election lease") {
		t.Errorf("log does not say the lease was lost")
	}
	if !p.log.Contains("Loop runner stopping") {
		t.Errorf("log does not show the loop stopping")
	}
	if got := *lease(t, e).Spec.HolderIdentity; got != intruder {
		t.Errorf("lease holder = %s after the replica stopped, want %s", got, intruder)
	}
}

// TestUnknownCloudProviderFailsAtStart: a provider this build does not ship
// stops the process at start-up with a message naming the ones it has.
func TestUnknownCloudProviderFailsAtStart(t *testing.T) {
	e := framework.New(t)
	args := append(baseArgs(e), "--cloud-provider=gce")
	p := startAutoscaler(t, "autoscaler", args...)
	if code := p.waitExit(20 * time.Second); code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
	// The message lists every provider of this build, kwok among them.
	if !regexp.MustCompile(`--cloud-provider \\"gce\\": unknown cloud provider; this build has \[[^\]]*\bkwok\b`).MatchString(p.log.String()) {
		t.Errorf("log does not explain the unknown provider:\n%s", p.log.String())
	}
}

// TestStartupErrorReleasesTheLease: a start-up error found after the Lease was
// acquired (a bad scheduler configuration, a bad kwok configuration) is
// logged, the Lease is released and the process exits non-zero at once, so a
// standby takes over and the Deployment shows the crash; it must not hold the
// Lease while answering /health-check 200.
func TestStartupErrorReleasesTheLease(t *testing.T) {
	e := framework.New(t)
	dir := t.TempDir()
	badScheduler := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(badScheduler, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: [{schedulerName: x, plugins: {filter: {enabled: [{name: NoSuchPlugin}]}}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badKwok := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(badKwok, []byte("nodeGroups: {this is: [not a list]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, arg, want string
	}{
		{"scheduler-config", "--scheduler-config-file=" + badScheduler, "NoSuchPlugin"},
		{"kwok-config", "--cloud-config=" + badKwok, "--cloud-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := leaderArgs(e)
			if tc.name == "kwok-config" {
				args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--nodes=") })
			}
			p := startAutoscaler(t, tc.name, append(args, tc.arg)...)
			if code := p.waitExit(30 * time.Second); code != 1 {
				t.Fatalf("exit code = %d, want 1", code)
			}
			if !p.log.Contains(acquired) {
				t.Fatalf("the replica never held the lease; the test does not exercise the case:\n%s", p.log.String())
			}
			if !p.log.Contains(tc.want) {
				t.Errorf("log does not name the error (%q):\n%s", tc.want, p.log.String())
			}
			l := lease(t, e)
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				t.Errorf("lease still held by %s after the replica exited", *h)
			}
		})
	}
}
