package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// The consolidation fault tests: the Deployment web (2 pods of 1 CPU, a PDB
// of minAvailable 1) runs on one node of the dear group (1/h; the priority
// expander prefers it for the scale-up); consolidation replaces that node by
// one node of the cheap group (0.2/h, its nodes registering 8 s after the
// increase), and a fault hits the plan on its way.

// fleet is one test's two groups, both labelled fleet=<name>.
type fleet struct{ name, dear, cheap, path string }

// consolidationFleet writes the kwok config and the priority expander's
// ConfigMap of the tests.
func consolidationFleet(e *framework.Env) fleet {
	e.T.Helper()
	f := fleet{name: framework.UniqueName("fleet"), dear: framework.UniqueName("dear"), cheap: framework.UniqueName("cheap")}
	f.path = itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 2
  pricePerHour: 1
  template:
    labels: {%[4]s: %[5]s, pool: %[1]s, fleet: %[3]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: %[2]s
  maxSize: 2
  pricePerHour: 0.2
  template:
    labels: {%[4]s: %[5]s, pool: %[2]s, fleet: %[3]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 8s}
`, f.dear, f.cheap, f.name, framework.TestNamespaceLabel, e.Namespace))
	cm := itest.PriorityConfigMap(e, fmt.Sprintf("20:\n  - ^%s$\n10:\n  - .*\n", f.dear))
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), cm, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	return f
}

// consolidationArgs: consolidation on, scale-down off (only the engine
// removes nodes), no settle time.
func consolidationArgs(e *framework.Env, f fleet, extra ...string) []string {
	return disruptionArgs(e, f.path, append([]string{"--consolidation-enabled", "--expander=priority",
		"--max-node-provision-time=60s"}, extra...)...)
}

// webOnDear creates web and its PDB and waits until both pods run on one
// node of the dear group, which it returns, with the sampler of Ready pods.
func webOnDear(e *framework.Env, f fleet) (string, func() int32) {
	e.T.Helper()
	itest.Deployment(e, "web", 2, map[string]string{"fleet": f.name})
	var node string
	e.Eventually(90*time.Second, "both web pods Running on one node of "+f.dear, func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		if err != nil || running != 2 || len(nodes) != 1 {
			return false, err
		}
		for n := range nodes {
			node = n
		}
		return strings.HasPrefix(node, f.dear), nil
	})
	// The drain waits for the replacement (8 s to register, then Ready):
	// the PDB is there before it.
	minReady, _ := itest.WebPDBAndSampler(e)
	return node, minReady
}

// planPhase is the phase of old's plan in the engine's state ConfigMap
// ("" when it has none).
func planPhase(ctx context.Context, e *framework.Env, old string) string {
	plans, err := enginePlans(ctx, e)
	if err != nil {
		return ""
	}
	raw, ok := plans[old]
	if !ok {
		return ""
	}
	s := string(raw)
	_, rest, ok := strings.Cut(s, `"phase":"`)
	if !ok {
		return ""
	}
	phase, _, _ := strings.Cut(rest, `"`)
	return phase
}

// consolidationOutcome is how a plan hit by a fault ended.
type consolidationOutcome struct {
	finished bool // the old node gone, web on the replacement
	on       string
	seen     []string
	asked    int
	deleted  []itest.NodeDeletion
}

// waitConsolidationSettled waits until no plan is in flight and the plan
// either finished (old gone, both web pods Running on one node of the cheap
// group) or was rolled back (old there, given back, both pods Running).
func waitConsolidationSettled(t *testing.T, e *framework.Env, f fleet, old string, deletions *itest.DeletionWatch,
	seen func() []string, ps ...*itest.AutoscalerProcess) consolidationOutcome {
	t.Helper()
	var out consolidationOutcome
	e.Eventually(180*time.Second, "the consolidation of "+old+" finished or rolled back, nothing in flight", func(ctx context.Context) (bool, error) {
		plans, err := enginePlans(ctx, e)
		if err != nil || len(plans) != 0 {
			return false, nil
		}
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		if err != nil || running != 2 || len(nodes) != 1 {
			return false, nil
		}
		for n := range nodes {
			out.on = n
		}
		_, err = e.Client.CoreV1().Nodes().Get(ctx, old, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out.finished = true
			return strings.HasPrefix(out.on, f.cheap), nil
		case err != nil:
			return false, nil
		}
		return checkGivenBack(ctx, e, old) == nil, nil
	})
	if out.finished {
		// The API server says the node is gone; the watch's informer may
		// see it seconds later when its watch was cut by a restart
		// (it then gets the deletion from its relist).
		e.Eventually(30*time.Second, "the deletion watch to see "+old+"'s deletion", func(context.Context) (bool, error) {
			for _, d := range deletions.All() {
				if strings.Contains(d.String(), old+" ") {
					return true, nil
				}
			}
			return false, nil
		})
	}
	out.seen = seen()
	out.asked = logCount(ps, logAskedReplacement)
	out.deleted = deletions.All()
	return out
}

// checkNothingHalfDone checks a settled consolidation: the PDB held, no
// node deleted while it ran web's pods, nothing deleted but the old node,
// one replacement asked for at most, and no node of the fleet left
// cordoned, tainted by the engine or annotated scale-down-disabled.
func checkNothingHalfDone(t *testing.T, e *framework.Env, f fleet, old string, out consolidationOutcome, minReady int32,
	deletions *itest.DeletionWatch) {
	t.Helper()
	if minReady < 1 {
		t.Errorf("Ready web pods fell to %d: evicted beyond the PDB's budget (minAvailable 1)", minReady)
	}
	if busy := deletions.Busy(); len(busy) > 0 {
		t.Errorf("nodes deleted while they ran web's pods: %v", busy)
	}
	for _, d := range out.deleted {
		if !strings.Contains(d.String(), old+" ") {
			t.Errorf("node deleted that the plan did not remove: %v", d)
		}
	}
	if out.finished && len(out.deleted) != 1 {
		t.Errorf("deletions %v, want the old node %s once", out.deleted, old)
	}
	if out.asked > 1 {
		t.Errorf("%d replacements asked for, want at most 1", out.asked)
	}
	var cheap []string
	for _, n := range out.seen {
		if strings.HasPrefix(n, f.cheap) {
			cheap = append(cheap, n)
		}
	}
	if len(cheap) > 1 {
		t.Errorf("nodes of the cheap group seen %v, want one replacement at most", cheap)
	}
	list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "fleet=" + f.name})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if err := checkGivenBack(e.Context(), e, n.Name); err != nil {
			t.Errorf("half-done: %v", err)
		}
	}
	plans, err := enginePlans(e.Context(), e)
	if err != nil || len(plans) != 0 {
		t.Errorf("plans left in flight: %v (%v)", plans, err)
	}
}

// fleetSeen is poolSeen for a fleet (both groups).
func fleetSeen(e *framework.Env, f fleet) func() []string {
	dear, cheap := poolSeen(e, f.dear), poolSeen(e, f.cheap)
	return func() []string {
		out := append(dear(), cheap()...)
		slices.Sort(out)
		return out
	}
}

// TestConsolidationSurvivesAPIServerRestartMidDrain: kube-apiserver is
// killed and started again 2 s later while the engine drains the dear
// node (its cheap replacement Ready). The plan ends cleanly: the node is
// removed once its pods moved (or given back), no pod evicted beyond the
// PDB, no node deleted with web's pods on it, nothing left cordoned or
// tainted, no plan left in flight.
func TestConsolidationSurvivesAPIServerRestartMidDrain(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := framework.New(t)
	describePlans(e)
	itest.DumpPods(e)
	f := consolidationFleet(e)
	seen := fleetSeen(e, f)
	deletions := itest.WatchNodeDeletions(e)
	p := itest.StartAutoscaler(t, "autoscaler", consolidationArgs(e, f)...)
	old, minReady := webOnDear(e, f)
	e.Eventually(90*time.Second, "the consolidation of "+old+" draining", func(ctx context.Context) (bool, error) {
		return planPhase(ctx, e, old) == disruption.PhaseDraining, nil
	})
	// Mid-drain: once one pod has left (the PDB allows one at a time), or
	// at the latest 3 s into the phase.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, on, err := itest.PodsOf(e.Context(), e, "web"); err == nil && on[old] < 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	phase := planPhase(e.Context(), e, old)
	_, on, _ := itest.PodsOf(e.Context(), e, "web")
	killed := time.Now()
	framework.RestartAPIServer(t, 2*time.Second)
	up := time.Now()
	select {
	case <-p.Done:
		t.Fatalf("the autoscaler exited while kube-apiserver restarted: %v", p.ExitErr)
	default:
	}
	out := waitConsolidationSettled(t, e, f, old, deletions, seen, p)
	t.Logf("figures: restarted in phase %q with %d web pods on %s; apiserver down %.1fs; finished %v (web on %s) %v after the kill; "+
		"nodes seen %v; replacements asked %d; deletions %v; min Ready %d; failed loops %d",
		phase, on[old], old, up.Sub(killed).Seconds(), out.finished, out.on, time.Since(killed).Round(100*time.Millisecond),
		out.seen, out.asked, out.deleted, minReady(), itest.CountLines(p.Log.String(), `"Loop failed"`))
	checkNothingHalfDone(t, e, f, old, out, minReady(), deletions)
	if !strings.Contains(p.Log.String(), "consolidatable") {
		t.Error("no consolidation in the autoscaler's log: the test did not exercise it")
	}
	if itest.CountLines(p.Log.String(), "panic") > 0 {
		t.Error("the autoscaler's log mentions a panic")
	}
}

// TestConsolidationFailoverMidReplacement: two replicas with leader
// election; the leader asks for the cheap replacement of the dear node
// (it registers 8 s after the increase) and is SIGKILLed. The new leader
// resumes the plan from the state ConfigMap: no second replacement, the
// drain as the PDB allows once it is Ready, the dear node deleted once (or
// the plan rolled back, the node given back), nothing left half-done.
func TestConsolidationFailoverMidReplacement(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := framework.New(t)
	describePlans(e)
	itest.DumpPods(e)
	f := consolidationFleet(e)
	seen := fleetSeen(e, f)
	deletions := itest.WatchNodeDeletions(e)
	leader, standby := startPair(t, e, consolidationArgs(e, f))
	old, minReady := webOnDear(e, f)
	e.Eventually(90*time.Second, "the leader asks for the cheap replacement of "+old, func(context.Context) (bool, error) {
		return leader.Log.Contains(logAskedReplacement), nil
	})
	phase := planPhase(e.Context(), e, old)
	if phase != disruption.PhaseSurging {
		t.Fatalf("phase of %s's plan when the leader is killed: %q, want Surging", old, phase)
	}
	if _, on, err := itest.PodsOf(e.Context(), e, "web"); err != nil || on[old] != 2 {
		t.Fatalf("web pods on %s when the replacement was asked for: %v (%v), want both", old, on, err)
	}
	killed := time.Now()
	tk := killLeader(t, e, leader, standby)
	out := waitConsolidationSettled(t, e, f, old, deletions, seen, leader, standby)
	t.Logf("figures: %v; finished %v (web on %s) %v after the kill; nodes seen %v; replacements asked %d; deletions %v; min Ready %d",
		tk, out.finished, out.on, time.Since(killed).Round(100*time.Millisecond), out.seen, out.asked, out.deleted, minReady())
	checkNothingHalfDone(t, e, f, old, out, minReady(), deletions)
	if standby.Log.Contains(logAskedReplacement) {
		t.Error("the new leader asked for a second replacement")
	}
	if out.finished && !standby.Log.Written(logDeletedDisrupted) {
		t.Error("the old node is gone but the new leader did not delete it (no deletion in its log)")
	}
	if itest.CountLines(standby.Log.String(), "panic") > 0 {
		t.Error("the new leader's log mentions a panic")
	}
}
