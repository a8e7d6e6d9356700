package disruption

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeHealth is a ReplacementHealth whose groups fail at set times and are
// backed off while set.
type fakeHealth struct {
	// failed is when each group last failed (an instance creation error).
	failed map[string]time.Time
	// backedOff: the groups backed off now, with why.
	backedOff map[string]string
	// since are the times FailedSince was asked about, by group.
	since map[string][]time.Time
}

func newFakeHealth() *fakeHealth {
	return &fakeHealth{failed: map[string]time.Time{}, backedOff: map[string]string{}, since: map[string][]time.Time{}}
}

func (f *fakeHealth) BackedOff(group string, _ time.Time) (bool, string) {
	why, ok := f.backedOff[group]
	return ok, why
}

func (f *fakeHealth) FailedSince(group string, since, now time.Time) (bool, string) {
	f.since[group] = append(f.since[group], since)
	at, ok := f.failed[group]
	if ok && at.After(since) && !at.After(now) {
		return true, "instance creation failed: STOCKOUT"
	}
	return false, ""
}

// TestReplacementFailureEndsTheWait: a voluntary plan whose replacement's
// group fails after the ask ends at once, its node given back as the
// timeout gives it back, with ReplacementFailed; a failure before the ask
// does not end it. An interruption drains all the same at once.
func TestReplacementFailureEndsTheWait(t *testing.T) {
	health := newFakeHealth()
	health.failed["cheap"] = t0.Add(-time.Minute) // before the ask: not this plan's
	f := newFixture(t, Options{Cooldown: time.Hour, ReplacementHealth: health}, readyNode("old", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"old"},
		Replacement: []Replacement{{Group: "cheap", Count: 1}}}}})
	f.addPod(t, podOn("old", "web-0"))
	f.loop(0)
	f.loop(time.Minute)
	if f.phase("old") != PhaseSurging || f.calls("IncreaseSize") != 1 {
		t.Fatalf("phase %q, increases %d: want the plan waiting for its replacement", f.phase("old"), f.calls("IncreaseSize"))
	}
	if got := health.since["cheap"]; len(got) != 1 || !got[0].Equal(t0) {
		t.Errorf("FailedSince asked since %v, want once since the ask (%v)", got, t0)
	}
	health.failed["cheap"] = t0.Add(90 * time.Second)
	f.loop(2 * time.Minute)
	if len(f.healer.st.Heals) != 0 {
		t.Fatalf("plan still in flight 2 minutes in (--max-node-provision-time 15m): %+v", f.healer.st.Heals["old"])
	}
	n := f.node(t, "old")
	if n.Spec.Unschedulable || hasTaintKey(n, Taint) {
		t.Error("the node was not given back (still cordoned or tainted)")
	}
	if _, ok := n.Annotations[scaleDownDisabled]; ok {
		t.Error("the scale-down-disabled annotation the plan wrote was not removed")
	}
	if len(f.deleted()) != 0 || !f.podExists("web-0") {
		t.Errorf("deletions %v, pod left %v: nothing may be removed", f.deleted(), f.podExists("web-0"))
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "DisruptionFailed") || !strings.Contains(ev, "ReplacementFailed") ||
		!strings.Contains(ev, "STOCKOUT") {
		t.Errorf("events:\n%s", ev)
	}
	if f.decisions(Drifted, ActionFailed) != 1 {
		t.Errorf("failed decisions %v, want 1", f.decisions(Drifted, ActionFailed))
	}
	if until := f.healer.st.Cooldown[cooldownKey(Drifted, "old")]; !until.Equal(t0.Add(2*time.Minute + time.Hour)) {
		t.Errorf("cooldown until %v, want an hour after the end", until)
	}

	// An interruption: the node goes anyway, so it drains at once.
	health = newFakeHealth()
	f = newFixture(t, Options{ReplacementHealth: health}, readyNode("spot", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
	f.healer.AddSource(&fakeSource{reason: Interrupted, cands: []Candidate{{Nodes: []string{"spot"},
		Replacement: []Replacement{{Group: "cheap", Count: 1}}}}})
	f.addPod(t, podOn("spot", "web-0"))
	f.loop(0)
	health.failed["cheap"] = t0.Add(time.Second)
	f.loop(30 * time.Second)
	if f.phase("spot") != PhaseDraining {
		t.Errorf("interrupted node in phase %q after its replacement's group failed, want Draining", f.phase("spot"))
	}
}

// TestTargetDropDoesNotEndTheWait: another plan's deletion lowers the
// replacement group's target below what it was once the replacement was
// asked; the plan goes on waiting, and drains once its replacement is Ready.
func TestTargetDropDoesNotEndTheWait(t *testing.T) {
	health := newFakeHealth()
	f := newFixture(t, Options{Budget: fixedBudget(100), ReplacementHealth: health}, readyNode("old", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 1, nil)
	c1 := readyNode("c1", nil)
	f.provider.AddNode("cheap", c1)
	if _, err := f.client.CoreV1().Nodes().Create(context.Background(), c1, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.nodes = append(f.nodes, c1)
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"old"},
		Replacement: []Replacement{{Group: "cheap", Count: 1}}}}})
	consolidate := &fakeSource{reason: Consolidatable}
	f.healer.AddSource(consolidate)
	f.addPod(t, podOn("old", "web-0"))
	f.loop(0)
	if f.phase("old") != PhaseSurging || f.target(t, "cheap") != 2 {
		t.Fatalf("phase %q, cheap's target %d: want the replacement asked for (target 2)", f.phase("old"), f.target(t, "cheap"))
	}
	consolidate.cands = []Candidate{{Nodes: []string{"c1"}}}
	f.loop(time.Minute)
	if got := f.deleted(); len(got) != 1 || got[0] != "cheap:c1" {
		t.Fatalf("deletions %v, want cheap:c1 (the other plan)", got)
	}
	f.nodes = f.nodes[:2]
	for _, at := range []time.Duration{2 * time.Minute, 10 * time.Minute} {
		f.loop(at)
		if r := f.healer.st.Heals["old"]; r == nil || r.Phase != PhaseSurging || !r.Started.Equal(t0) || f.calls("IncreaseSize") != 1 {
			t.Fatalf("at %v, cheap's target %d: plan %+v, increases %d; want the first plan still waiting for its replacement",
				at, f.target(t, "cheap"), r, f.calls("IncreaseSize"))
		}
	}
	repl := readyNode("cheap-1", nil)
	f.provider.AddNode("cheap", repl)
	f.nodes = append(f.nodes, repl)
	f.loop(11 * time.Minute)
	if f.phase("old") != PhaseDraining {
		t.Errorf("phase %q once the replacement is Ready, want Draining", f.phase("old"))
	}
	if ev := f.drainEvents(); strings.Contains(ev, "DisruptionFailed") {
		t.Errorf("events:\n%s", ev)
	}
}

// TestBackedOffGroupIsNotAsked: a candidate whose replacement's group is
// backed off waits, untouched, said once; it starts once the back-off
// ends. A plan that reaches its ask while the group is backed off ends
// with ReplacementGroupBackedOff, its nodes given back; an interruption
// drains without asking first.
func TestBackedOffGroupIsNotAsked(t *testing.T) {
	health := newFakeHealth()
	health.backedOff["cheap"] = "STOCKOUT: no capacity"
	f := newFixture(t, Options{ReplacementHealth: health}, readyNode("old", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"old"},
		Replacement: []Replacement{{Group: "cheap", Count: 1}}}}})
	f.loop(0)
	f.loop(time.Minute)
	if f.calls("IncreaseSize") != 0 || len(f.healer.st.Heals) != 0 {
		t.Fatalf("increases %d, plans %d: a backed-off group was asked", f.calls("IncreaseSize"), len(f.healer.st.Heals))
	}
	if n := f.node(t, "old"); n.Spec.Unschedulable {
		t.Error("the node was cordoned for a replacement that was not asked")
	}
	ev := f.drainEvents()
	if strings.Count(ev, "DisruptionWaiting") != 1 || !strings.Contains(ev, "ReplacementGroupBackedOff") || !strings.Contains(ev, "STOCKOUT") {
		t.Errorf("want one DisruptionWaiting event over two loops; events:\n%s", ev)
	}
	if got := f.decisions(Drifted, ActionSkippedBackoff); got != 2 {
		t.Errorf("skipped_backoff decisions %v, want 2", got)
	}
	delete(health.backedOff, "cheap")
	f.loop(2 * time.Minute)
	if f.calls("IncreaseSize") != 1 || f.phase("old") != PhaseSurging {
		t.Errorf("increases %d, phase %q: want the replacement asked once the back-off ended", f.calls("IncreaseSize"), f.phase("old"))
	}

	// A plan recorded before its ask (a restart), resumed while the group
	// is backed off.
	f = newFixture(t, Options{ReplacementHealth: health}, readyNode("old", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
	f.saveOldState(t, `{"heals":{"old":{"node":"old","group":"g","for":"drifted","reason":"drifted","phase":"Starting",`+
		`"started":"2026-01-01T00:00:00Z","phaseSince":"2026-01-01T00:00:00Z",`+
		`"nodes":[{"node":"old","group":"g","providerID":"fake://old","before":{"unschedulable":false}}],`+
		`"replacements":[{"group":"cheap","count":1,"readyBefore":0,"increased":false,"known":[]}]}},"cooldown":{}}`)
	if err := f.healer.cordon(context.Background(), "old"); err != nil {
		t.Fatal(err)
	}
	health.backedOff["cheap"] = "STOCKOUT: no capacity"
	f.loop(time.Minute)
	if f.calls("IncreaseSize") != 0 || len(f.healer.st.Heals) != 0 {
		t.Fatalf("increases %d, plans %d: want the plan ended without asking", f.calls("IncreaseSize"), len(f.healer.st.Heals))
	}
	if n := f.node(t, "old"); n.Spec.Unschedulable || hasTaintKey(n, Taint) {
		t.Error("the node was not given back")
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "DisruptionFailed") || !strings.Contains(ev, "ReplacementGroupBackedOff") {
		t.Errorf("events:\n%s", ev)
	}

	// An interruption does not wait: drained first, replaced after.
	f = newFixture(t, Options{ReplacementHealth: health}, readyNode("spot", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
	f.healer.AddSource(&fakeSource{reason: Interrupted, cands: []Candidate{{Nodes: []string{"spot"},
		Replacement: []Replacement{{Group: "cheap", Count: 1}}}}})
	f.addPod(t, podOn("spot", "web-0"))
	f.loop(0)
	if f.calls("IncreaseSize") != 0 || f.phase("spot") != PhaseDraining {
		t.Errorf("increases %d, phase %q: want the interrupted node drained without asking its backed-off group",
			f.calls("IncreaseSize"), f.phase("spot"))
	}
}

func (f *fixture) target(t *testing.T, group string) int {
	t.Helper()
	groups, err := f.provider.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.Id() == group {
			n, err := g.TargetSize(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no group %s", group)
	return 0
}

// TestHealWithBackedOffGroup: a heal does not ask its backed-off group
// first: the node drains first, its replacement asked for after the
// removal; at the group's minimum the heal waits, cordoned, until the
// back-off ends. A heal whose replacement's group fails while it waits
// drains at once.
func TestHealWithBackedOffGroup(t *testing.T) {
	health := newFakeHealth()
	health.backedOff["g"] = "STOCKOUT: no capacity"
	f := newFixture(t, Options{ReplaceFirst: true, ReplacementHealth: health}, readyNode("sick", map[string]string{Annotation: "disk"}),
		readyNode("a", nil), readyNode("b", nil))
	f.addPod(t, podOn("sick", "web-0"))
	f.loop(0)
	if f.calls("IncreaseSize") != 0 || f.phase("sick") != PhaseDraining {
		t.Errorf("increases %d, phase %q: want the node drained first, its backed-off group not asked", f.calls("IncreaseSize"), f.phase("sick"))
	}

	f = newSizedFixture(t, Options{ReplacementHealth: health}, 3, 5, readyNode("sick", map[string]string{Annotation: "disk"}),
		readyNode("a", nil), readyNode("b", nil))
	f.loop(0)
	f.loop(time.Minute)
	if f.calls("IncreaseSize") != 0 || f.phase("sick") != PhaseStarting || f.calls("DeleteNodes") != 0 {
		t.Fatalf("increases %d, deletions %d, phase %q: want the heal of a group at its minimum waiting", f.calls("IncreaseSize"),
			f.calls("DeleteNodes"), f.phase("sick"))
	}
	delete(health.backedOff, "g")
	f.loop(2 * time.Minute)
	if f.calls("IncreaseSize") != 1 || f.phase("sick") != PhaseSurging {
		t.Fatalf("increases %d, phase %q: want the replacement asked once the back-off ended", f.calls("IncreaseSize"), f.phase("sick"))
	}
	health.failed["g"] = t0.Add(150 * time.Second)
	f.loop(3 * time.Minute)
	if f.phase("sick") == PhaseSurging {
		t.Errorf("phase %q: want the heal draining once its replacement's group failed", f.phase("sick"))
	}
}

// TestInterruptedNodeDrainsWhileItsReplacementComes: an interrupted node's
// instance goes within minutes, so its plan asks for the replacement and
// drains without waiting for it to be Ready; a drifted node in the same
// state waits for its replacement.
func TestInterruptedNodeDrainsWhileItsReplacementComes(t *testing.T) {
	for _, tc := range []struct {
		reason Reason
		want   string
	}{
		{Interrupted, PhaseDraining},
		{Drifted, PhaseSurging},
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			f := newFixture(t, Options{Budget: fixedBudget(100)}, readyNode("old", nil), readyNode("b", nil))
			f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
			f.healer.AddSource(&fakeSource{reason: tc.reason, cands: []Candidate{{Nodes: []string{"old"},
				Replacement: []Replacement{{Group: "cheap", Count: 1}}}}})
			f.addPod(t, podOn("old", "web-0"))
			f.loop(0)
			f.loop(10 * time.Second)
			if got := f.phase("old"); got != tc.want {
				t.Errorf("phase %q 10 s in, replacement not Ready, want %q", got, tc.want)
			}
			if got := f.target(t, "cheap"); got != 1 {
				t.Errorf("cheap's target %d, want 1 (the replacement asked for)", got)
			}
		})
	}
}
