package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestDisruptionDriftSurvivesAPIServerRestart: a drifted node's replacement
// has been asked for (it registers 8 s after the increase) when
// kube-apiserver is killed and started again 2 s later. The autoscaler
// resumes the plan where it was: exactly one replacement, the drain only
// once it is Ready and as the PDB allows, the old node deleted once, no pod
// lost, nothing left in flight or cordoned.
func TestDisruptionDriftSurvivesAPIServerRestart(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := framework.New(t)
	describePlans(e)
	itest.DumpPods(e)
	pool := framework.UniqueName("drift")
	path := itest.OneGroupConfig(e, pool, 3, "registrationDelay: 8s")
	seen := poolSeen(e, pool)
	p := itest.StartAutoscaler(t, "autoscaler", disruptionArgs(e, path, "--drift-enabled", "--max-node-provision-time=60s")...)
	old := webOnOneNode(e, pool)
	minReady, _ := itest.WebPDBAndSampler(e)
	markDrifted(e, old)
	e.Eventually(60*time.Second, "the replacement of the drifted node asked for", func(context.Context) (bool, error) {
		return p.Log.Contains(logAskedReplacement), nil
	})
	if n, on, err := itest.PodsOf(e.Context(), e, "web"); err != nil || n != 2 || on[old] != 2 {
		t.Fatalf("%d web pods Running (%v) when the replacement was asked for (%v), want both still on %s", n, on, err, old)
	}
	killed := time.Now()
	framework.RestartAPIServer(t, 2*time.Second)
	up := time.Now()
	select {
	case <-p.Done:
		t.Fatalf("the autoscaler exited while kube-apiserver restarted: %v", p.ExitErr)
	default:
	}
	r := waitReplaced(t, e, pool, old, killed, seen, p)
	t.Logf("figures: apiserver down %.1fs; %v; min Ready web pods %d; connection-refused lines %d; failed loops %d",
		up.Sub(killed).Seconds(), r, minReady(), itest.CountLines(p.Log.String(), "connection refused"),
		itest.CountLines(p.Log.String(), `"Loop failed"`))
	checkReplacedOnce(t, e, r, old, minReady())
	e.Eventually(30*time.Second, "DisruptionSucceeded on "+old, func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e, old)
		return err == nil && ev["DisruptionSucceeded"] != "", err
	})
	if itest.CountLines(p.Log.String(), "panic") > 0 {
		t.Error("the autoscaler's log mentions a panic")
	}
}

// TestDisruptionExpiryFailover: two replicas with leader election; the
// leader asks for the replacement of an expired node (it registers 8 s
// after the increase) and is SIGKILLed. The new leader resumes the plan
// from the state ConfigMap: it asks for no second replacement, waits for
// the first, drains the old node as the PDB allows and deletes it, once;
// no other node is deleted.
func TestDisruptionExpiryFailover(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := framework.New(t)
	describePlans(e)
	itest.DumpPods(e)
	pool := framework.UniqueName("expiry")
	path := itest.OneGroupConfig(e, pool, 3, "registrationDelay: 8s")
	seen := poolSeen(e, pool)
	deleted := nodeDeletions(t, e, pool)
	// The lifetime leaves the replacement young enough to be left alone
	// until the test's checks are done.
	leader, standby := startPair(t, e, disruptionArgs(e, path, "--max-node-lifetime=50s", "--max-node-provision-time=60s"))
	old := webOnOneNode(e, pool)
	minReady, _ := itest.WebPDBAndSampler(e)
	e.Eventually(90*time.Second, "the leader asks for the replacement of the expired node", func(context.Context) (bool, error) {
		return leader.Log.Contains(logAskedReplacement), nil
	})
	plans, err := enginePlans(e.Context(), e)
	if err != nil || len(plans) != 1 || !strings.Contains(string(plans[old]), `"phase":"Surging"`) {
		t.Fatalf("plans in the state ConfigMap when the leader is killed: %v (%v); want %s's, Surging", plans, err, old)
	}
	killed := time.Now()
	tk := killLeader(t, e, leader, standby)
	r := waitReplaced(t, e, pool, old, killed, seen, leader, standby)
	t.Logf("figures: %v; %v; nodes deleted %v; min Ready web pods %d", tk, r, deleted(), minReady())
	checkReplacedOnce(t, e, r, old, minReady())
	if standby.Log.Contains(logAskedReplacement) {
		t.Error("the new leader asked for a second replacement")
	}
	if !standby.Log.Written(logDeletedDisrupted) {
		t.Error("the new leader did not finish the plan (no deletion in its log)")
	}
	if got := deleted(); len(got) != 1 || got[0] != old {
		t.Errorf("nodes deleted %v, want only %s", got, old)
	}
	if itest.CountLines(standby.Log.String(), "panic") > 0 {
		t.Error("the new leader's log mentions a panic")
	}
}

// TestDisruptionReplacementOutOfCapacity: the drifted node's group has no
// capacity beyond one instance (the kwok provider's outOfCapacityAfter: the
// increase is accepted and its instance fails, STOCKOUT). The plan ends as
// soon as the group is backed off for it, well before
// --max-node-provision-time: the old node is given back as it was
// (uncordoned, untainted, its annotation gone), none of its pods evicted, a
// DisruptionFailed event says why (ReplacementFailed), the failed instance
// goes. Past the cooldown the candidate waits while the group is backed off
// (DisruptionWaiting, not asked), and the plan, tried again once the
// back-off ended, ends as cleanly again.
func TestDisruptionReplacementOutOfCapacity(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := framework.New(t)
	describePlans(e)
	itest.DumpPods(e)
	pool := framework.UniqueName("full")
	path := itest.OneGroupConfig(e, pool, 3, "outOfCapacityAfter: 1")
	seen := poolSeen(e, pool)
	deleted := nodeDeletions(t, e, pool)
	p := itest.StartAutoscaler(t, "autoscaler", disruptionArgs(e, path, "--drift-enabled", "--max-node-provision-time=15s",
		"--node-healing-cooldown=10s", "--initial-node-group-backoff-duration=40s")...)
	old := webOnOneNode(e, pool)
	pods := webPodUIDs(t, e)
	minReady, _ := itest.WebPDBAndSampler(e)
	markDrifted(e, old)
	started := time.Now()
	var firstEnd, slowest time.Duration
	for attempt := 1; attempt <= 2; attempt++ {
		e.Eventually(90*time.Second, fmt.Sprintf("attempt %d: the replacement asked for", attempt), func(context.Context) (bool, error) {
			return countMatches(p.Log.String(), logAskedReplacement) >= attempt, nil
		})
		asked := time.Now()
		e.Eventually(60*time.Second, fmt.Sprintf("attempt %d: the node cordoned while the replacement is awaited", attempt), func(ctx context.Context) (bool, error) {
			n, err := e.Client.CoreV1().Nodes().Get(ctx, old, metav1.GetOptions{})
			return err == nil && n.Spec.Unschedulable, err
		})
		e.Eventually(90*time.Second, fmt.Sprintf("attempt %d: the plan ended and %s given back", attempt, old), func(ctx context.Context) (bool, error) {
			plans, err := enginePlans(ctx, e)
			if err != nil || len(plans) != 0 {
				return false, err
			}
			return checkGivenBack(ctx, e, old) == nil, nil
		})
		if attempt == 1 {
			firstEnd = time.Since(started)
		}
		// Polled: the end is seen up to a poll late.
		if took := time.Since(asked); took > slowest {
			slowest = took
		}
		if took := time.Since(asked); took >= 15*time.Second {
			t.Errorf("attempt %d: the plan ended %v after its replacement was asked, want it ended when the group was backed off, "+
				"before --max-node-provision-time (15s)", attempt, took.Round(100*time.Millisecond))
		}
		ev, err := itest.NodeEvents(e.Context(), e, old)
		if err != nil {
			t.Fatal(err)
		}
		if msg := ev["DisruptionFailed"]; !strings.Contains(msg, "ReplacementFailed") || !strings.Contains(msg, "STOCKOUT") {
			t.Errorf("attempt %d: DisruptionFailed event %q, want it to say the replacement's group failed (STOCKOUT)", attempt, msg)
		}
		if attempt == 1 {
			// Past the cooldown (10s), the group still backed off (40s):
			// the candidate waits, its group not asked.
			e.Eventually(60*time.Second, "the candidate waiting for the back-off to end", func(ctx context.Context) (bool, error) {
				ev, err := itest.NodeEvents(ctx, e, old)
				return err == nil && strings.Contains(ev["DisruptionWaiting"], "ReplacementGroupBackedOff"), err
			})
			if n := countMatches(p.Log.String(), logAskedReplacement); n != 1 {
				t.Errorf("the replacement asked for %d times while its group was backed off, want once", n)
			}
		}
		if got := webPodUIDs(t, e); !sameSet(got, pods) {
			t.Errorf("attempt %d: web pods %v, want the same two as before (%v): a pod was evicted for a replacement that never came", attempt, got, pods)
		}
	}
	// The failed instances go (the autoscaler's clean-up of failed
	// instances); the group is left with its one node.
	e.Eventually(60*time.Second, "no instance left but the old node's", func(context.Context) (bool, error) {
		return pendingKwokInstances(t, e, pool) == 0 && len(itest.NodeNames(e, pool)) == 1, nil
	})
	t.Logf("figures: first attempt ended %v after the drift; slowest end %v after the ask; attempts %d; nodes seen %v; nodes deleted %v; kwok increases %d; min Ready %d",
		firstEnd.Round(100*time.Millisecond), slowest.Round(100*time.Millisecond), countMatches(p.Log.String(), logAskedReplacement), seen(), deleted(),
		countMatches(p.Log.String(), logKwokIncreased, `nodeGroup="`+pool+`"`), minReady())
	if got := deleted(); len(got) != 0 {
		t.Errorf("nodes deleted %v, want none", got)
	}
	if got := seen(); len(got) != 1 {
		t.Errorf("nodes seen %v, want only %s (the replacement's instance never registers)", got, old)
	}
	if minReady() < 2 {
		t.Errorf("Ready web pods fell to %d, want both kept", minReady())
	}
	if n := countMatches(p.Log.String(), "Deleted broken instance", `nodeGroup="`+pool+`"`); n != 2 {
		t.Errorf("%d failed instances of the replacements deleted, want 2 (one per attempt)", n)
	}
	if n := countMatches(p.Log.String(), logDeletedDisrupted); n != 0 {
		t.Errorf("the engine deleted %d nodes", n)
	}
}

func webPodUIDs(t *testing.T, e *framework.Env) []string {
	t.Helper()
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.Status.Phase == apiv1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, string(p.UID))
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}

// TestDisruptionReplacementGroupAtMax: the drifted node's group is at its
// maximum size, so its replacement cannot be asked for. The plan ends
// before it touches anything: the node is never cordoned nor tainted, no
// increase is asked for, no pod is evicted, a DisruptionFailed event says
// ReplacementGroupFull, and the plan, tried again after the cooldown, ends
// the same way.
func TestDisruptionReplacementGroupAtMax(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := framework.New(t)
	describePlans(e)
	itest.DumpPods(e)
	pool := framework.UniqueName("atmax")
	path := itest.OneGroupConfig(e, pool, 1, "")
	p := itest.StartAutoscaler(t, "autoscaler", disruptionArgs(e, path, "--drift-enabled", "--node-healing-cooldown=5s")...)
	old := webOnOneNode(e, pool)
	pods := webPodUIDs(t, e)
	touched := watchTouched(e, old)
	markDrifted(e, old)
	var first time.Duration
	started := time.Now()
	e.Eventually(60*time.Second, "a DisruptionFailed event saying ReplacementGroupFull", func(ctx context.Context) (bool, error) {
		n, err := failedEvents(ctx, e, old, "ReplacementGroupFull")
		return n >= 1, err
	})
	first = time.Since(started)
	// Tried again after the cooldown (5 s), ended the same way before
	// touching anything.
	e.Eventually(60*time.Second, "a second attempt ended before it touched anything", func(context.Context) (bool, error) {
		return countMatches(p.Log.String(), `"Disruption phase"`, `from="Starting" to="Restoring"`) >= 2, nil
	})
	e.Eventually(30*time.Second, "the second attempt's plan gone", func(ctx context.Context) (bool, error) {
		plans, err := enginePlans(ctx, e)
		return err == nil && len(plans) == 0, err
	})
	plans, err := enginePlans(e.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("figures: first attempt ended %v after the drift; plans left %d; node touched %q; kwok increases %d",
		first.Round(100*time.Millisecond), len(plans), touched(), countMatches(p.Log.String(), logKwokIncreased, `nodeGroup="`+pool+`"`))
	if len(plans) != 0 {
		t.Errorf("plans left in flight: %v", plans)
	}
	if why := touched(); why != "" {
		t.Errorf("the node was touched by a plan that could not replace it: %s", why)
	}
	if n := countMatches(p.Log.String(), logAskedReplacement); n != 0 {
		t.Errorf("%d replacements asked for of a group at its maximum", n)
	}
	if got := webPodUIDs(t, e); !sameSet(got, pods) {
		t.Errorf("web pods %v, want the same two as before (%v)", got, pods)
	}
	if err := checkGivenBack(e.Context(), e, old); err != nil {
		t.Error(err)
	}
}

// watchTouched samples node every 100 ms and returns what a disruption
// did to it, if anything was ever seen: cordoned, tainted, annotated.
func watchTouched(e *framework.Env, node string) func() string {
	var mu sync.Mutex
	why := ""
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := checkGivenBack(ctx, e, node)
			cancel()
			if err != nil && !strings.Contains(err.Error(), "context") {
				mu.Lock()
				if why == "" {
					why = err.Error()
				}
				mu.Unlock()
			}
		}
	}()
	e.T.Cleanup(func() { close(done); <-stopped })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return why
	}
}

// failedEvents counts the DisruptionFailed events on node whose message
// says reason (an event repeated is one object with a count).
func failedEvents(ctx context.Context, e *framework.Env, node, reason string) (int, error) {
	list, err := e.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ev := range list.Items {
		if ev.Reason == "DisruptionFailed" && strings.Contains(ev.Message, reason) {
			n += int(max(ev.Count, 1))
		}
	}
	return n, nil
}
