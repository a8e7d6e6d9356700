package lifecycle

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
	"k8s.io/client-go/util/retry"

	"k8s.io/autoscaler/cluster-autoscaler/leaderlease"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

func baseArgs(e *framework.Env) []string {
	return []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--namespace=" + e.Namespace,
		"--cloud-provider=kwok", "--kwok-provider-enabled",
		"--nodes=0:3:ng",
		"--scan-interval=1s",
		"--v=2",
	}
}

// TestAutoscalerServesHealthAndMetrics runs the real binary against the real
// API server and reads its HTTP endpoints.
func TestAutoscalerServesHealthAndMetrics(t *testing.T) {
	e := framework.New(t)
	p := itest.StartAutoscaler(t, "autoscaler", baseArgs(e)...)

	e.Eventually(30*time.Second, "/health-check answers 200 and loops have run", func(ctx context.Context) (bool, error) {
		code, _, err := p.Get(ctx, "/health-check")
		if err != nil || code != 200 {
			return false, nil
		}
		_, body, err := p.Get(ctx, "/metrics")
		return err == nil && strings.Contains(body, `cluster_autoscaler_last_activity{activity="mainSuccessful"}`), nil
	})
	_, body, err := p.Get(e.Context(), "/metrics")
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
	if code, _, _ := p.Get(e.Context(), "/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ answered %d without --profiling, want 404", code)
	}
	if code := p.Terminate(20 * time.Second); code != 0 {
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

// leaseWriter is the Lease's holder identity and the process that wrote it
// last (leaderlease.InstanceAnnotation).
func leaseWriter(t *testing.T, e *framework.Env) (holder, instance string) {
	t.Helper()
	l := lease(t, e)
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return holder, l.Annotations[leaderlease.InstanceAnnotation]
}

// TestLeaderElectionFailover: a second replica waits while the first holds the
// Lease (even when it names another --leader-elect-resource-namespace), and takes over within the lease duration once the first gets SIGTERM.
// Both run on this machine, so both have the holder identity upstream's
// would write, the hostname: only the process named on the Lease leads.
func TestLeaderElectionFailover(t *testing.T) {
	e := framework.New(t)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	first := itest.StartAutoscaler(t, "first", leaderArgs(e)...)
	e.Eventually(30*time.Second, "first replica leads", func(context.Context) (bool, error) {
		return first.Log.Contains(itest.Acquired), nil
	})
	holder, firstInstance := leaseWriter(t, e)
	if holder != hostname || firstInstance == "" {
		t.Fatalf("Lease holder %q written by %q; want the hostname %q (upstream's identity) and a process ID", holder, firstInstance, hostname)
	}

	// The second replica names another namespace for the Lease: ignored, as
	// upstream, so both replicas still compete for the same Lease.
	second := itest.StartAutoscaler(t, "second", append(leaderArgs(e), "--leader-elect-resource-namespace=kube-system")...)
	e.Eventually(30*time.Second, "second replica waits for the lease", func(context.Context) (bool, error) {
		return second.Log.Contains("Waiting for the leader-election lease"), nil
	})
	if !second.Log.Written("--leader-elect-resource-namespace is ignored") {
		t.Error("the ignored --leader-elect-resource-namespace is not warned about")
	}
	// Several renewals of the first replica pass; the second must still wait.
	time.Sleep(3 * time.Second)
	if second.Log.Contains(itest.Acquired) {
		t.Fatal("second replica acquired the lease while the first held it (same hostname, another process)")
	}
	if got, by := leaseWriter(t, e); got != holder || by != firstInstance {
		t.Fatalf("Lease changed from %s (%s) to %s (%s) while the first replica ran", holder, firstInstance, got, by)
	}
	// A standby replica is healthy: it must not be restarted for waiting.
	if code, _, err := second.Get(e.Context(), "/health-check"); err != nil || code != 200 {
		t.Fatalf("standby /health-check = %d, %v; want 200", code, err)
	}

	stopped := time.Now()
	if code := first.Terminate(20 * time.Second); code != 0 {
		t.Fatalf("first replica exit code after SIGTERM = %d, want 0", code)
	}
	e.Eventually(6*time.Second, "second replica takes over within the lease duration", func(context.Context) (bool, error) {
		return second.Log.Contains(itest.Acquired), nil
	})
	t.Logf("takeover %v after SIGTERM", time.Since(stopped).Round(100*time.Millisecond))
	if got, by := leaseWriter(t, e); got != hostname || by == firstInstance || by == "" {
		t.Fatalf("Lease held by %s (%s) after the takeover; want %s written by the second process", got, by, hostname)
	}
	e.Eventually(20*time.Second, "second replica runs loops", func(ctx context.Context) (bool, error) {
		_, body, err := second.Get(ctx, "/metrics")
		return err == nil && strings.Contains(body, `cluster_autoscaler_last_activity{activity="mainSuccessful"}`), nil
	})
}

// TestLeaseOfAnotherProcessOfTheSameHostname: a Lease held under this
// machine's hostname, upstream's identity, but written by another process is
// someone else's: the replica waits for it at start, leads once it is
// released, and when such a process takes the Lease back, stops and exits 1
// rather than lead beside it.
func TestLeaseOfAnotherProcessOfTheSameHostname(t *testing.T) {
	e := framework.New(t)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	twin := func(l *coordinationv1.Lease) *coordinationv1.Lease {
		l.Spec.HolderIdentity = &hostname
		duration := int32(3600)
		l.Spec.LeaseDurationSeconds = &duration
		now := metav1.NewMicroTime(time.Now())
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[leaderlease.InstanceAnnotation] = "twin-process"
		return l
	}
	held := twin(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "cluster-autoscaler", Namespace: e.Namespace}})
	if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Create(e.Context(), held, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the twin's Lease: %v", err)
	}
	p := itest.StartAutoscaler(t, "replica", leaderArgs(e)...)
	e.Eventually(30*time.Second, "the replica sees the twin's Lease", func(context.Context) (bool, error) {
		return p.Log.Contains("Another replica holds the lease"), nil
	})
	time.Sleep(2 * time.Second) // four retry periods
	if p.Log.Contains(itest.Acquired) {
		t.Fatalf("the replica took a Lease another process of its hostname holds:\n%s", p.Log.String())
	}

	// The twin releases the Lease (as a stopping replica does): the replica leads.
	l := lease(t, e)
	empty := ""
	l.Spec.HolderIdentity = &empty
	if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Update(e.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("releasing the twin's Lease: %v", err)
	}
	e.Eventually(20*time.Second, "the replica leads once the Lease is free", func(context.Context) (bool, error) {
		return p.Log.Contains(itest.Acquired), nil
	})

	// The twin takes the Lease back: the replica must stop, not renew it as its own.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the replica renews it meanwhile
		_, err := e.Client.CoordinationV1().Leases(e.Namespace).Update(e.Context(), twin(lease(t, e)), metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("the twin taking the Lease: %v", err)
	}
	if code := p.WaitExit(20 * time.Second); code != 1 {
		t.Fatalf("exit code after another process of the hostname took the lease = %d, want 1", code)
	}
	if !p.Log.Written("lost the leader-election lease") {
		t.Errorf("log does not say the lease was lost")
	}
	if _, by := leaseWriter(t, e); by != "twin-process" {
		t.Errorf("Lease written by %q after the replica stopped, want the twin's", by)
	}
}

// TestLostLeaseStopsTheLoop: when another holder takes the Lease, the replica
// stops its loop and exits non-zero, so that its Deployment restarts it as a
// standby instead of two replicas scaling at once.
func TestLostLeaseStopsTheLoop(t *testing.T) {
	e := framework.New(t)
	p := itest.StartAutoscaler(t, "replica", leaderArgs(e)...)
	e.Eventually(30*time.Second, "replica leads", func(context.Context) (bool, error) {
		return p.Log.Contains(itest.Acquired), nil
	})

	// Another holder takes the Lease with a long duration and keeps it. The
	// replica renews it meanwhile: a write on a copy it renewed since
	// conflicts, and is made again on the fresh one.
	intruder := "intruder"
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := lease(t, e)
		l.Spec.HolderIdentity = &intruder
		duration := int32(3600)
		l.Spec.LeaseDurationSeconds = &duration
		now := metav1.NewMicroTime(time.Now())
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		_, err := e.Client.CoordinationV1().Leases(e.Namespace).Update(e.Context(), l, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("taking the Lease: %v", err)
	}
	if code := p.WaitExit(20 * time.Second); code != 1 {
		t.Fatalf("exit code after losing the lease = %d, want 1", code)
	}
	if !p.Log.Written("lost the leader-election lease") {
		t.Errorf("log does not say the lease was lost")
	}
	if !p.Log.Written("Loop runner stopping") {
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
	// --kwok-provider-enabled is for the kwok provider only.
	args := append(slices.DeleteFunc(baseArgs(e), func(a string) bool { return a == "--kwok-provider-enabled" }),
		"--cloud-provider=gce")
	p := itest.StartAutoscaler(t, "autoscaler", args...)
	if code := p.WaitExit(20 * time.Second); code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
	// The message lists every provider of this build, kwok among them.
	if !regexp.MustCompile(`--cloud-provider \\"gce\\": unknown cloud provider; this build has \[[^\]]*\bkwok\b`).MatchString(p.Log.String()) {
		t.Errorf("log does not explain the unknown provider:\n%s", p.Log.String())
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
			p := itest.StartAutoscaler(t, tc.name, append(args, tc.arg)...)
			if code := p.WaitExit(30 * time.Second); code != 1 {
				t.Fatalf("exit code = %d, want 1", code)
			}
			if !p.Log.Written(itest.Acquired) {
				t.Fatalf("the replica never held the lease; the test does not exercise the case:\n%s", p.Log.String())
			}
			if !p.Log.Written(tc.want) {
				t.Errorf("log does not name the error (%q):\n%s", tc.want, p.Log.String())
			}
			l := lease(t, e)
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				t.Errorf("lease still held by %s after the replica exited", *h)
			}
		})
	}
}
