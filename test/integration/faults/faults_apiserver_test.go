package faults

import (
	"context"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestAPIServerRestartMidLoop: kube-apiserver is killed (SIGKILL) right
// after the autoscaler scaled a group up, while the kwok provider still has
// the new nodes to create, and is started again 2 s later. The autoscaler,
// with the default leader election and client limits, stays up: its loops
// resume, the scale-up in flight completes with exactly the nodes asked
// for, and a later scale-up works.
func TestAPIServerRestartMidLoop(t *testing.T) {
	itest.SkipUnlessSlow(t)
	apiserverRestart(t, 2*time.Second)
}

// TestAPIServerRestartLong is the same with kube-apiserver down for 20 s,
// longer than the leader-election renew deadline (10 s), and so without
// leader election (with it, the replica gives up its lease and exits, as
// upstream's does, for another replica to take over):
//
//	RELIABILITY_LONG=1 go test -race -count=1 -run 'TestAPIServerRestartLong' -v ./test/integration/faults/
func TestAPIServerRestartLong(t *testing.T) {
	itest.SkipUnlessSlow(t)
	skipUnlessLong(t)
	apiserverRestart(t, 20*time.Second, "--leader-elect=false")
}

func apiserverRestart(t *testing.T, downtime time.Duration, extra ...string) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool := framework.UniqueName("ng")
	sel := map[string]string{"pool": pool}
	path := itest.OneGroupConfig(e, pool, 10, "registrationDelay: 2s")
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, append([]string{"--v=2"}, extra...)...)...)
	itest.CreatePods(e, "web", 3, "3", sel)
	e.Eventually(60*time.Second, "the scale-up made", func(context.Context) (bool, error) {
		return p.Log.Contains(`"Scaled up node group"`), nil
	})
	killed := time.Now()
	framework.RestartAPIServer(t, downtime)
	ready := time.Now()
	select {
	case <-p.Done:
		t.Fatalf("the autoscaler exited while kube-apiserver restarted: %v", p.ExitErr)
	default:
	}
	e.Eventually(30*time.Second, "a loop finished without error after the restart", func(context.Context) (bool, error) {
		return lastSuccessfulLoop(t, p).After(ready), nil
	})
	resumed := time.Now()
	e.Eventually(90*time.Second, "the 3 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 3)
	})
	if got := itest.NodesPerPool(e)[pool]; got != 3 {
		t.Errorf("%d nodes after the scale-up in flight during the restart, want 3", got)
	}
	later := time.Now()
	itest.CreatePods(e, "later", 2, "3", sel)
	e.Eventually(90*time.Second, "a later scale-up: the 5 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 5)
	})
	if got := itest.NodesPerPool(e)[pool]; got != 5 {
		t.Errorf("%d nodes after the later scale-up, want 5", got)
	}
	select {
	case <-p.Done:
		t.Fatalf("the autoscaler exited: %v", p.ExitErr)
	default:
	}
	if code, _, err := p.Get(e.Context(), "/health-check"); err != nil || code != 200 {
		t.Errorf("/health-check answered %d (%v), want 200", code, err)
	}
	log := p.Log.String()
	if itest.CountLines(log, "panic") > 0 {
		t.Error("the autoscaler's log mentions a panic")
	}
	t.Logf("figures: apiserver-down-to-ready=%.1fs first-good-loop-after-ready=%.1fs later-scale-up-to-running=%.1fs "+
		"failed-loops=%d connection-refused-lines=%d", ready.Sub(killed).Seconds(), resumed.Sub(ready).Seconds(),
		time.Since(later).Seconds(), itest.CountLines(log, `"Loop failed"`), itest.CountLines(log, "connection refused"))
}

// TestAPIServerOutageEndsTheLease documents the other side of the long
// outage: with leader election (the default), a replica that cannot renew
// its lease within the renew deadline (10 s) stops acting and exits
// non-zero, as upstream's does, so that it never acts beside a new leader;
// its Deployment restarts it. It exits cleanly, without a panic:
//
//	RELIABILITY_LONG=1 go test -race -count=1 -run 'TestAPIServerOutageEndsTheLease' -v ./test/integration/faults/
func TestAPIServerOutageEndsTheLease(t *testing.T) {
	itest.SkipUnlessSlow(t)
	skipUnlessLong(t)
	e := framework.New(t)
	path := itest.OneGroupConfig(e, framework.UniqueName("ng"), 10, "")
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--v=2")...)
	e.Eventually(30*time.Second, "the lease acquired", func(context.Context) (bool, error) {
		return p.Log.Contains("Acquired the leader-election lease"), nil
	})
	killed := time.Now()
	exitedAt := make(chan time.Time, 1)
	go func() { <-p.Done; exitedAt <- time.Now() }()
	framework.RestartAPIServer(t, 20*time.Second)
	code := p.WaitExit(30 * time.Second)
	exited := (<-exitedAt).Sub(killed)
	if code == 0 || !p.Log.Written("lost the leader-election lease") {
		t.Errorf("exit code %d, want non-zero with the lost lease logged", code)
	}
	if itest.CountLines(p.Log.String(), "panic") > 0 {
		t.Error("the autoscaler's log mentions a panic")
	}
	t.Logf("figures: exit-code=%d exited=%.1fs after the kill", code, exited.Seconds())
}
