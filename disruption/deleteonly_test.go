package disruption

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
)

// storedRemovals is scale-down's removals as the state ConfigMap records them.
func storedRemovals(t *testing.T, f *fixture) map[string]*removal {
	t.Helper()
	st, err := (&store{client: f.client, namespace: "kube-system"}).load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.ScaleDown
}

func removalOf(node string, r Reason) Removal {
	return Removal{Node: node, Group: "g", Reason: r, Why: string(r)}
}

// TestScaleDownRemovalOnRecord: a removal scale-down starts is admitted
// (no budget names scale-down's reasons: upstream's limits alone), shows in
// InFlight and the status, is written with its phase at the next loop, and
// goes from the record once it ended, counted by its outcome.
func TestScaleDownRemovalOnRecord(t *testing.T) {
	var nodes []*apiv1.Node
	var rs []Removal
	for _, n := range []string{"a", "b", "c", "d"} {
		nodes = append(nodes, readyNode(n, nil))
		rs = append(rs, removalOf(n, Empty))
	}
	f := newFixture(t, Options{}, nodes...)
	f.loop(0)
	if held := f.healer.AdmitRemovals(context.Background(), t0, rs, false); len(held) != 0 {
		t.Fatalf("held %v: the default budget (10%% of 4 nodes) must not hold scale-down back", held)
	}
	if got := f.healer.InFlight(); got["a"] != Empty || len(got) != 4 {
		t.Errorf("InFlight %v, want the 4 nodes for empty", got)
	}
	f.healer.RemovalPhase("a", PhaseDeleting, t0.Add(time.Second))
	f.loop(time.Minute)
	stored := storedRemovals(t, f)
	if len(stored) != 4 || stored["a"].Phase != PhaseDeleting || stored["b"].Phase != PhaseStarting || stored["a"].For != Empty {
		t.Fatalf("stored removals %v, want a Deleting, b to d Starting, for empty", stored)
	}
	if s := f.healer.StatusSections()[StatusKey]; !strings.Contains(s, "disruption: empty") || !strings.Contains(s, "scale-down: empty") {
		t.Errorf("status %q does not show the removals", s)
	}
	f.healer.RemovalEnded("a", ActionCompleted)
	f.healer.RemovalEnded("a", ActionFailed) // told twice: counted once
	f.healer.RemovalEnded("b", ActionCancelled)
	f.loop(2 * time.Minute)
	if stored := storedRemovals(t, f); len(stored) != 2 || stored["a"] != nil || stored["b"] != nil {
		t.Errorf("stored removals %v, want c and d only", stored)
	}
	if f.decisions(Empty, ActionStarted) != 4 || f.decisions(Empty, ActionCompleted) != 1 ||
		f.decisions(Empty, ActionCancelled) != 1 || f.decisions(Empty, ActionFailed) != 0 {
		t.Errorf("decisions started %v completed %v cancelled %v failed %v, want 4 1 1 0", f.decisions(Empty, ActionStarted),
			f.decisions(Empty, ActionCompleted), f.decisions(Empty, ActionCancelled), f.decisions(Empty, ActionFailed))
	}
}

// TestScaleDownAndPlansExcludeEachOther: a node in one of the engine's
// plans is held back from scale-down; a node scale-down removes is never
// taken by a plan, and counts against its group's budget.
func TestScaleDownAndPlansExcludeEachOther(t *testing.T) {
	f := newFixture(t, Options{Budget: fixedBudget(100)}, readyNode("a", nil), readyNode("b", nil), readyNode("c", nil))
	src := &fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"a"}, Replacement: []Replacement{{Group: "g", Count: 1}}}}}
	f.healer.AddSource(src)
	f.loop(0)
	if f.phase("a") == "" {
		t.Fatal("the drift plan did not start")
	}
	held := f.healer.AdmitRemovals(context.Background(), t0, []Removal{removalOf("a", Underutilized), removalOf("b", Underutilized)}, false)
	if !strings.Contains(held["a"], "disruption engine is removing it (drifted)") || held["b"] != "" {
		t.Errorf("held %v, want a (in the drift plan) only", held)
	}
	// An atomic job goes whole or not at all.
	held = f.healer.AdmitRemovals(context.Background(), t0, []Removal{removalOf("a", Empty), removalOf("c", Empty)}, true)
	if held["a"] == "" || !strings.Contains(held["c"], "zeroOrMaxNodeScaling") {
		t.Errorf("held %v, want both nodes of the atomic job", held)
	}
	src.cands = append(src.cands, Candidate{Nodes: []string{"b"}})
	f.loop(time.Minute)
	if p := f.phase("b"); p != "" || f.decisions(Drifted, ActionStarted) != 1 {
		t.Errorf("a plan took node b, which scale-down is removing (phase %q, %v plans started)", p, f.decisions(Drifted, ActionStarted))
	}
	for _, d := range f.deleted() {
		if d == "g:b" {
			t.Error("the engine deleted node b, which scale-down is removing")
		}
	}
	if f.healer.InFlight()["b"] != Underutilized {
		t.Errorf("InFlight %v, want b underutilized", f.healer.InFlight())
	}
}

// underutilizedBudget holds underutilized at limit nodes of a group
// disrupting at once, every other reason not at all (as budget.Set with
// "nodes=<limit>;reasons=underutilized", which package budget tests).
type underutilizedBudget int

func (b underutilizedBudget) Allowed(_ string, r Reason, _, disrupting int, _ time.Time) int {
	if r != Underutilized {
		return 1 << 30
	}
	return max(int(b)-disrupting, 0)
}

// TestBudgetNamingScaleDownHoldsItBack: a budget for underutilized holds
// scale-down's removals per group, the group's nodes disrupting for every
// reason counted.
func TestBudgetNamingScaleDownHoldsItBack(t *testing.T) {
	nodes := []*apiv1.Node{readyNode("a", nil), readyNode("b", nil), readyNode("c", nil), readyNode("d", nil)}
	f := newFixture(t, Options{Budget: underutilizedBudget(1)}, nodes...)
	f.loop(0)
	held := f.healer.AdmitRemovals(context.Background(), t0,
		[]Removal{removalOf("a", Underutilized), removalOf("b", Underutilized), removalOf("c", Empty)}, false)
	if held["a"] != "" || !strings.Contains(held["b"], "disruption budget of node group g for underutilized") || held["c"] != "" {
		t.Errorf("held %v, want b only (one underutilized node of a group at once; empty not held)", held)
	}
	if got := f.decisions(Underutilized, ActionSkippedBudget); got != 1 {
		t.Errorf("skipped_budget %v, want 1", got)
	}
	// a and c disrupting: still no room for b.
	if held := f.healer.AdmitRemovals(context.Background(), t0, []Removal{removalOf("b", Underutilized)}, false); held["b"] == "" {
		t.Error("b admitted while the group's disruptions are over the budget")
	}
	f.healer.RemovalEnded("a", ActionCompleted)
	f.healer.RemovalEnded("c", ActionCompleted)
	if held := f.healer.AdmitRemovals(context.Background(), t0, []Removal{removalOf("b", Underutilized)}, false); len(held) != 0 {
		t.Errorf("held %v once the group's removals ended", held)
	}
}

// TestRemovalsLeftByAPreviousLeader: a new engine reads the removals its
// predecessor recorded: a node gone counts completed, a node left without
// the ToBeDeleted taint counts cancelled (with an event) and goes back to
// scale-down, a node the provider is still deleting is waited for until
// MaxNodeProvisionTime, then counted failed.
func TestRemovalsLeftByAPreviousLeader(t *testing.T) {
	tainted := readyNode("tainted", nil)
	tainted.Spec.Taints = []apiv1.Taint{{Key: ScaleDownTaint, Effect: apiv1.TaintEffectNoSchedule}}
	f := newFixture(t, Options{}, readyNode("clean", nil), tainted)
	f.saveOldState(t, `{"heals":{},"cooldown":{},"scaleDown":{`+
		`"gone":{"node":"gone","group":"g","for":"empty","phase":"Deleting","started":"2026-01-01T00:00:00Z","phaseSince":"2026-01-01T00:00:00Z","owner":"old"},`+
		`"clean":{"node":"clean","group":"g","for":"underutilized","phase":"Draining","started":"2026-01-01T00:00:00Z","phaseSince":"2026-01-01T00:00:00Z","owner":"old"},`+
		`"tainted":{"node":"tainted","group":"g","for":"empty","phase":"Deleting","started":"2026-01-01T00:00:00Z","phaseSince":"2026-01-01T00:00:00Z","owner":"old"}}}`)
	f.loop(time.Minute)
	if f.decisions(Empty, ActionCompleted) != 1 || f.decisions(Underutilized, ActionCancelled) != 1 {
		t.Errorf("completed %v cancelled %v, want 1 and 1", f.decisions(Empty, ActionCompleted), f.decisions(Underutilized, ActionCancelled))
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "DisruptionCancelled") || !strings.Contains(ev, "previous leader") {
		t.Errorf("events %q, want DisruptionCancelled for the node left", ev)
	}
	stored := storedRemovals(t, f)
	if len(stored) != 1 || stored["tainted"] == nil || stored["tainted"].Owner != "old" {
		t.Fatalf("stored removals %v, want the tainted node's, still the old leader's", stored)
	}
	if f.healer.InFlight()["tainted"] != Empty {
		t.Errorf("InFlight %v, want the node being deleted", f.healer.InFlight())
	}
	f.loop(16 * time.Minute)
	if f.decisions(Empty, ActionFailed) != 1 || len(storedRemovals(t, f)) != 0 {
		t.Errorf("failed %v, stored %v: want the wait ended after MaxNodeProvisionTime", f.decisions(Empty, ActionFailed),
			storedRemovals(t, f))
	}
}

// TestRemovalsReadWhileTheActuatorWrites: the status, InFlight and the
// loop read scale-down's removals while the actuator's goroutines record
// their phases and ends (make test-slow runs it under -race, which the
// status writer's read once tripped in the binary).
func TestRemovalsReadWhileTheActuatorWrites(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("a", nil), readyNode("b", nil))
	f.loop(0)
	f.healer.AdmitRemovals(context.Background(), t0, []Removal{removalOf("a", Empty), removalOf("b", Underutilized)}, false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			f.healer.RemovalPhase("a", []string{PhaseDraining, PhaseDeleting}[i%2], t0.Add(time.Duration(i)*time.Second))
		}
		f.healer.RemovalEnded("b", ActionCompleted)
	}()
	for i := range 50 {
		_ = f.healer.StatusSections()
		_ = f.healer.InFlight()
		f.loop(time.Duration(i) * time.Second)
	}
	<-done
	if got := f.healer.InFlight(); len(got) != 1 || got["a"] != Empty {
		t.Errorf("InFlight %v, want a alone", got)
	}
}
