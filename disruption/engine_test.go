package disruption

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// fakeSource proposes cands, whatever the loop.
type fakeSource struct {
	reason Reason
	cands  []Candidate
	asked  int
}

func (s *fakeSource) Reason() Reason { return s.reason }

func (s *fakeSource) Propose(context.Context, *processors.Loop) []Candidate {
	s.asked++
	return s.cands
}

// value reads a counter's or a gauge's value.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

func (f *fixture) decisions(r Reason, action string) float64 {
	return value(f.t, f.healer.dm.decisions.WithLabelValues(string(r), action))
}

func (f *fixture) dropPods(node string) {
	var kept []*apiv1.Pod
	for _, p := range f.pods {
		if p.Spec.NodeName != node {
			kept = append(kept, p)
		}
	}
	f.pods = kept
}

func (f *fixture) deleted() []string {
	var out []string
	for _, c := range f.provider.Calls() {
		if c.Method == "DeleteNodes" {
			out = append(out, c.Group+":"+strings.Join(c.Nodes, ","))
		}
	}
	return out
}

// TestDriftReplacesFirstWithAnotherGroup: a drifted node is replaced by a
// node of another (cheaper) group: the replacement is asked for first and
// waited Ready, only then is the old node drained, and it is deleted by
// name; events and metrics say so.
func TestDriftReplacesFirstWithAnotherGroup(t *testing.T) {
	f := newFixture(t, Options{Cooldown: time.Hour}, readyNode("old", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
	src := &fakeSource{reason: Drifted, cands: []Candidate{{Reason: Drifted, Nodes: []string{"old"},
		Replacement: []Replacement{{Group: "cheap", Count: 1}}, SavingPerHour: 0.25, Message: "template changed"}}}
	f.healer.AddSource(src)
	f.addPod(t, podOn("old", "web-0"))
	f.loop(0)
	if f.calls("IncreaseSize") != 1 || f.phase("old") != PhaseSurging {
		t.Fatalf("IncreaseSize %d, phase %q: want the replacement asked for first", f.calls("IncreaseSize"), f.phase("old"))
	}
	if n := f.node(t, "old"); !n.Spec.Unschedulable || !hasTaintKey(n, Taint) {
		t.Error("the node to replace is not cordoned")
	}
	if got := value(t, f.healer.dm.saving); got != 0.25 {
		t.Errorf("estimated saving %v, want 0.25", got)
	}
	f.loop(time.Minute)
	if f.phase("old") != PhaseSurging || len(f.deleted()) != 0 {
		t.Fatalf("phase %q, deletions %v: the node must wait for its replacement", f.phase("old"), f.deleted())
	}
	repl := readyNode("cheap-1", nil)
	f.provider.AddNode("cheap", repl)
	f.nodes = append(f.nodes, repl)
	f.loop(2 * time.Minute)
	if f.phase("old") != PhaseDraining || len(f.deleted()) != 0 {
		t.Fatalf("phase %q, deletions %v: want the node draining, its pod still there", f.phase("old"), f.deleted())
	}
	f.dropPods("old") // evicted
	f.loop(3 * time.Minute)
	if got := f.deleted(); len(got) != 1 || got[0] != "g:old" {
		t.Errorf("deletions %v, want g:old by name", got)
	}
	if len(f.healer.st.Heals) != 0 {
		t.Errorf("plan still in flight: %+v", f.healer.st.Heals["old"])
	}
	ev := f.drainEvents()
	if !strings.Contains(ev, "DisruptionStarted") || !strings.Contains(ev, "DisruptionSucceeded") || !strings.Contains(ev, "drifted") {
		t.Errorf("events:\n%s", ev)
	}
	if f.decisions(Drifted, ActionStarted) != 1 || f.decisions(Drifted, ActionCompleted) != 1 {
		t.Errorf("decisions started %v completed %v", f.decisions(Drifted, ActionStarted), f.decisions(Drifted, ActionCompleted))
	}
	if src.asked != 4 {
		t.Errorf("source asked %d times in 4 loops", src.asked)
	}
}

// TestFailedReplacementGivesTheNodesBack: a scale-up error, or a
// replacement not Ready in time, ends the plan with the node uncordoned and
// its annotation given back; nothing is deleted, and an event says so.
func TestFailedReplacementGivesTheNodesBack(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		inject       bool
	}{{"scale-up error", "ScaleUpFailed", true}, {"timeout", "ReplacementNotReady", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Cooldown: time.Hour}, readyNode("old", nil), readyNode("b", nil))
			f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
			if tc.inject {
				f.provider.InjectError("IncreaseSize", "cheap", errors.New("quota exceeded"))
			}
			f.healer.AddSource(&fakeSource{reason: Expired, cands: []Candidate{{Nodes: []string{"old"},
				Replacement: []Replacement{{Group: "cheap", Count: 1}}}}})
			f.loop(0)
			f.loop(20 * time.Minute)
			f.loop(20*time.Minute + time.Second)
			if len(f.healer.st.Heals) != 0 {
				t.Fatalf("plan still in flight: %+v", f.healer.st.Heals["old"])
			}
			n := f.node(t, "old")
			if n.Spec.Unschedulable || hasTaintKey(n, Taint) {
				t.Error("the node was not uncordoned")
			}
			if _, ok := n.Annotations[scaleDownDisabled]; ok {
				t.Error("the scale-down-disabled annotation the plan wrote was not given back")
			}
			if len(f.deleted()) != 0 {
				t.Errorf("deletions %v", f.deleted())
			}
			if ev := f.drainEvents(); !strings.Contains(ev, "DisruptionFailed") || !strings.Contains(ev, tc.reason) {
				t.Errorf("events:\n%s", ev)
			}
			if f.decisions(Expired, ActionFailed) != 1 {
				t.Errorf("failed decisions %v", f.decisions(Expired, ActionFailed))
			}
		})
	}
}

// TestVoluntaryPlanCancelledWhenNoLongerProposed: a candidate its source
// stops proposing before its drain is cancelled and its node given back;
// once the drain began it goes on.
func TestVoluntaryPlanCancelledWhenNoLongerProposed(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("a", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
	src := &fakeSource{reason: Consolidatable, cands: []Candidate{{Nodes: []string{"a"}, Replacement: []Replacement{{Group: "cheap", Count: 1}}}}}
	f.healer.AddSource(src)
	f.loop(0)
	src.cands = nil
	f.loop(time.Minute)
	if len(f.healer.st.Heals) != 0 || f.decisions(Consolidatable, ActionCancelled) != 1 {
		t.Fatalf("plans %d, cancelled %v: want the plan cancelled", len(f.healer.st.Heals), f.decisions(Consolidatable, ActionCancelled))
	}
	if n := f.node(t, "a"); n.Spec.Unschedulable {
		t.Error("the cancelled node stays cordoned")
	}

	// Delete only, drain begun: no longer proposed does not stop it.
	src.cands = []Candidate{{Nodes: []string{"b"}}}
	f.addPod(t, podOn("b", "web-0"))
	f.loop(2 * time.Minute)
	if f.phase("b") != PhaseDraining {
		t.Fatalf("phase %q, want Draining", f.phase("b"))
	}
	src.cands = nil
	f.loop(3 * time.Minute)
	if f.phase("b") != PhaseDraining {
		t.Errorf("phase %q: a plan whose drain began is not cancelled", f.phase("b"))
	}
}

type fixedBudget int

func (b fixedBudget) Allowed(string, Reason, int, int, time.Time) int { return int(b) }

// TestProtections: the voluntary reasons leave alone the nodes upstream,
// Karpenter's users and the Protected hook protect, and the young ones.
func TestProtections(t *testing.T) {
	young := readyNode("young", nil)
	young.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	nodes := []*apiv1.Node{readyNode("sdd", map[string]string{scaleDownDisabled: "true"}),
		readyNode("dnd", map[string]string{DoNotDisrupt: "true"}), readyNode("poddnd", nil), readyNode("podste", nil),
		young, readyNode("booked", nil), readyNode("free", nil)}
	f := newFixture(t, Options{SettleTime: 10 * time.Minute, Budget: fixedBudget(100),
		Protected: func(n string) (bool, string) { return n == "booked", "booked" }}, nodes...)
	p := podOn("poddnd", "a")
	p.Annotations = map[string]string{DoNotDisrupt: "true"}
	f.addPod(t, p)
	p = podOn("podste", "b")
	p.Annotations = map[string]string{SafeToEvict: "false"}
	f.addPod(t, p)
	var cands []Candidate
	for _, n := range nodes {
		cands = append(cands, Candidate{Nodes: []string{n.Name}})
	}
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: cands})
	f.loop(0)
	if got := f.deleted(); len(got) != 1 || got[0] != "g:free" {
		t.Errorf("deleted %v, want only free", got)
	}
	if got := f.decisions(Drifted, ActionSkippedProtected); got != 6 {
		t.Errorf("skipped_protected %v, want 6", got)
	}
}

// TestRunLimitIgnoresTheSettleTime: a node whose ProvisioningRequest's
// run limit passed is released even when younger than the settle time
// (the request was told when); other protections still hold it.
func TestRunLimitIgnoresTheSettleTime(t *testing.T) {
	young := readyNode("young", nil)
	young.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	kept := readyNode("kept", map[string]string{DoNotDisrupt: "true"})
	kept.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	f := newFixture(t, Options{SettleTime: 10 * time.Minute, Budget: fixedBudget(100)}, young, kept)
	f.healer.AddSource(&fakeSource{reason: MaxRunDuration, cands: []Candidate{{Nodes: []string{"young"}}, {Nodes: []string{"kept"}}}})
	f.loop(0)
	if got := f.deleted(); len(got) != 1 || got[0] != "g:young" {
		t.Errorf("deleted %v, want only young (kept carries do-not-disrupt)", got)
	}
}

// TestBudgets: by default a voluntary reason takes 10% of a group's nodes
// at once (at least 1); a candidate of several nodes with new capacity
// starts only when the budget allows all of them, one without starts with
// the part the budget allows.
func TestBudgets(t *testing.T) {
	var nodes []*apiv1.Node
	var cands []Candidate
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		nodes = append(nodes, readyNode(n, nil))
		cands = append(cands, Candidate{Nodes: []string{n}})
	}
	f := newFixture(t, Options{}, nodes...)
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: cands})
	f.loop(0)
	if got := f.decisions(Drifted, ActionStarted); got != 2 {
		t.Errorf("%v plans started in a group of 12, want 2 (10%% rounded up)", got)
	}
	if f.decisions(Drifted, ActionSkippedBudget) != 10 {
		t.Errorf("skipped_budget %v, want 10", f.decisions(Drifted, ActionSkippedBudget))
	}

	// A removal without new capacity holds in part: it starts with the
	// nodes the budget allows, in its order; one with new capacity waits
	// for the budget of all its nodes.
	f = newFixture(t, Options{Budget: fixedBudget(1)}, nodes[:4]...)
	f.healer.AddSource(&fakeSource{reason: Consolidatable, cands: []Candidate{{Nodes: []string{"b", "a"}}}})
	f.loop(0)
	if f.decisions(Consolidatable, ActionStarted) != 1 || f.decisions(Consolidatable, ActionSkippedBudget) != 0 {
		t.Error("a removal of 2 nodes did not start with the 1 node a budget of 1 allows")
	}
	if got := f.deleted(); len(got) != 1 || got[0] != "g:b" {
		t.Errorf("deleted %v, want b, the first node of the candidate", got)
	}
	f = newFixture(t, Options{Budget: fixedBudget(1)}, nodes[:4]...)
	f.healer.AddSource(&fakeSource{reason: Consolidatable, cands: []Candidate{{Nodes: []string{"a", "b"},
		Replacement: []Replacement{{Group: "g", Count: 1}}}}})
	f.loop(0)
	if f.decisions(Consolidatable, ActionStarted) != 0 || f.decisions(Consolidatable, ActionSkippedBudget) != 1 {
		t.Error("a replacement of 2 nodes started with a budget of 1")
	}
}

// TestReasonOrderAndOffers: a node proposed for several reasons goes for
// the first of Reasons; an offer replaces the previous one and is consumed
// at the next Repair.
func TestReasonOrderAndOffers(t *testing.T) {
	f := newFixture(t, Options{Budget: fixedBudget(100)}, readyNode("x", nil), readyNode("y", nil), readyNode("z", nil))
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"x"}}}})
	f.healer.AddSource(&fakeSource{reason: Expired, cands: []Candidate{{Nodes: []string{"x"}}}})
	f.healer.Offer(Consolidatable, []Candidate{{Nodes: []string{"y"}}})
	f.healer.Offer(Consolidatable, []Candidate{{Nodes: []string{"z"}}})
	for _, n := range []string{"x", "y", "z"} {
		f.addPod(t, podOn(n, "p-"+n)) // holds the plans in their drain
	}
	f.loop(0)
	if r := f.healer.st.Heals["x"]; r == nil || r.For != Expired || f.decisions(Drifted, ActionStarted) != 0 {
		t.Errorf("x: %+v, want it expired (Expired comes before Drifted)", r)
	}
	if f.healer.st.Heals["y"] != nil || f.healer.st.Heals["z"] == nil {
		t.Error("the second offer did not replace the first")
	}
	if len(f.healer.offers) != 0 {
		t.Error("the offer was not consumed")
	}
}

// TestHealWinsOverDrift: a node that needs healing and is drifted goes for
// Unhealthy, with healing's rules.
func TestHealWinsOverDrift(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("x", map[string]string{Annotation: "disk"}), readyNode("y", nil), readyNode("z", nil))
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"x"}}}})
	f.loop(0)
	if r := f.healer.st.Heals["x"]; r == nil || r.For != Unhealthy {
		t.Errorf("x: %+v, want it healed", r)
	}
}

// TestPlanOfSeveralNodes: a delete-only plan of two nodes checks the
// group's minimum for both before it starts, drains both, and deletes each
// by name.
func TestPlanOfSeveralNodes(t *testing.T) {
	f := newSizedFixture(t, Options{Budget: fixedBudget(100)}, 2, 10, readyNode("a", nil), readyNode("b", nil), readyNode("c", nil))
	f.healer.AddSource(&fakeSource{reason: Consolidatable, cands: []Candidate{{Nodes: []string{"a", "b"}}}})
	f.loop(0)
	if len(f.healer.st.Heals) != 0 || f.calls("DeleteNodes") != 0 {
		t.Fatal("a plan that breaks the group's minimum went on")
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "GroupAtMinimum") {
		t.Errorf("events:\n%s", ev)
	}

	f = newFixture(t, Options{Budget: fixedBudget(100)}, readyNode("a", nil), readyNode("b", nil), readyNode("c", nil))
	f.healer.AddSource(&fakeSource{reason: Consolidatable, cands: []Candidate{{Nodes: []string{"a", "b"}}}})
	f.addPod(t, podOn("a", "p"))
	f.loop(0)
	if r := f.healer.st.Heals["a"]; r == nil || len(r.Nodes) != 2 || r.Phase != PhaseDraining || len(f.deleted()) != 0 {
		t.Fatalf("plan %+v, deletions %v: want both nodes draining, none deleted while a pod is left", r, f.deleted())
	}
	f.dropPods("a")
	f.loop(time.Minute)
	if got := strings.Join(f.deleted(), " "); got != "g:a g:b" {
		t.Errorf("deletions %q, want each node by name", got)
	}
}

// TestNodeProtectedBeforeItsDrainIsGivenBack: a pod annotated
// do-not-disrupt on a node waiting for its replacement cancels the plan.
func TestNodeProtectedBeforeItsDrainIsGivenBack(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("a", nil), readyNode("b", nil))
	f.healer.AddSource(&fakeSource{reason: Expired, cands: []Candidate{{Nodes: []string{"a"}, Replacement: []Replacement{{Group: "g", Count: 1}}}}})
	f.loop(0)
	if f.phase("a") != PhaseSurging {
		t.Fatalf("phase %q, want Surging", f.phase("a"))
	}
	p := podOn("a", "batch-0")
	p.Annotations = map[string]string{DoNotDisrupt: "true"}
	f.addPod(t, p)
	f.loop(time.Minute)
	if len(f.healer.st.Heals) != 0 || f.decisions(Expired, ActionCancelled) != 1 {
		t.Fatalf("plans %d, cancelled %v: want the plan cancelled", len(f.healer.st.Heals), f.decisions(Expired, ActionCancelled))
	}
	if n := f.node(t, "a"); n.Spec.Unschedulable || hasTaintKey(n, Taint) {
		t.Error("the node was not given back")
	}
}

// TestOldRecordIsRewrittenWithItsReason: a heal recorded by a version that
// only healed is resumed as Unhealthy and written back in the current form.
func TestOldRecordIsRewrittenWithItsReason(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("sick", map[string]string{Annotation: "disk"}), readyNode("ok", nil))
	f.addPod(t, podOn("sick", "web-0"))
	f.saveOldState(t, `{"heals":{"sick":{"node":"sick","group":"g","providerID":"fake://sick","reason":"annotation: disk",`+
		`"phase":"Draining","started":"2026-01-01T00:00:00Z","phaseSince":"2026-01-01T00:00:00Z","readyBefore":1,"targetBefore":2,`+
		`"increased":true,"deleteIssued":false,"before":{"unschedulable":false}}},"cooldown":{}}`)
	f.loop(time.Second)
	cm, err := f.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), StateConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := cm.Data["state"]
	for _, want := range []string{`"for":"unhealthy"`, `"nodes":[{"node":"sick","group":"g","providerID":"fake://sick","before":{"unschedulable":false}}]`,
		`"replacements":[{"group":"g","count":1,"readyBefore":1,"targetBefore":2,"increased":true,"known":null}]`} {
		if !strings.Contains(data, want) {
			t.Errorf("state %s lacks %s", data, want)
		}
	}
	if f.phase("sick") != PhaseDraining || f.calls("IncreaseSize") != 0 {
		t.Errorf("phase %q, IncreaseSize %d: want the heal resumed in its drain, the replacement not asked again", f.phase("sick"), f.calls("IncreaseSize"))
	}
}

// TestEachPlanWaitsForItsOwnReplacement: two plans replacing into the same
// group do not share a new node: the older drains with the first one Ready,
// the other waits for the second.
func TestEachPlanWaitsForItsOwnReplacement(t *testing.T) {
	f := newFixture(t, Options{Budget: fixedBudget(100)}, readyNode("a", nil), readyNode("b", nil), readyNode("c", nil))
	src := &fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"a"}, Replacement: []Replacement{{Group: "g", Count: 1}}}}}
	f.healer.AddSource(src)
	f.addPod(t, podOn("a", "pa"))
	f.addPod(t, podOn("b", "pb"))
	f.loop(0)
	src.cands = append(src.cands, Candidate{Nodes: []string{"b"}, Replacement: []Replacement{{Group: "g", Count: 1}}})
	f.loop(time.Second)
	if f.phase("a") != PhaseSurging || f.phase("b") != PhaseSurging {
		t.Fatalf("phases %q %q, want both Surging", f.phase("a"), f.phase("b"))
	}
	n1 := readyNode("new-1", nil)
	f.provider.AddNode("g", n1)
	f.nodes = append(f.nodes, n1)
	f.loop(time.Minute)
	if f.phase("a") != PhaseDraining || f.phase("b") != PhaseSurging {
		t.Fatalf("phases %q %q with one new node, want a (the older) Draining, b Surging", f.phase("a"), f.phase("b"))
	}
	n2 := readyNode("new-2", nil)
	f.provider.AddNode("g", n2)
	f.nodes = append(f.nodes, n2)
	f.loop(2 * time.Minute)
	if f.phase("b") != PhaseDraining {
		t.Errorf("phase of b %q with its own new node Ready, want Draining", f.phase("b"))
	}
}

// TestStateWrittenAgainAfterAFailedSave: when the write that removes the
// last finished plan fails (the API server restarting), the next loop
// writes the state again although nothing changed in it: the ConfigMap
// must not go on showing a plan in flight that has ended.
func TestStateWrittenAgainAfterAFailedSave(t *testing.T) {
	f := newFixture(t, Options{Cooldown: time.Hour}, readyNode("old", nil), readyNode("b", nil))
	f.provider.AddNodeGroup("cheap", 0, 5, 0, nil)
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Reason: Drifted, Nodes: []string{"old"},
		Replacement: []Replacement{{Group: "cheap", Count: 1}}}}})
	f.addPod(t, podOn("old", "web-0"))
	f.loop(0)
	f.loop(time.Minute)
	repl := readyNode("cheap-1", nil)
	f.provider.AddNode("cheap", repl)
	f.nodes = append(f.nodes, repl)
	f.loop(2 * time.Minute)
	f.dropPods("old")
	// Only the write that records no plan fails: the one after the last
	// step of the finished plan.
	failing := true
	f.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(k8stesting.UpdateAction).GetObject().(*apiv1.ConfigMap)
		if failing && strings.Contains(cm.Data["state"], `"heals":{}`) {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	f.loop(3 * time.Minute)
	if len(f.healer.st.Heals) != 0 || len(f.deleted()) != 1 {
		t.Fatalf("plans %v, deletions %v: want the plan finished", f.healer.st.Heals, f.deleted())
	}
	if plans := storedPlans(t, f); len(plans) == 0 {
		t.Fatal("the failed write changed the ConfigMap: the test exercises nothing")
	}
	failing = false
	f.loop(4 * time.Minute)
	if plans := storedPlans(t, f); len(plans) != 0 {
		t.Errorf("the ConfigMap still shows plans %v a loop after the failed write", plans)
	}
}

// storedPlans is the plans the state ConfigMap records.
func storedPlans(t *testing.T, f *fixture) map[string]*plan {
	t.Helper()
	st, err := (&store{client: f.client, namespace: "kube-system"}).load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Heals
}
