package disruption

import (
	"context"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// takenByScaleDown writes on the API's copy of node what scale-down writes
// once it removes it (its taint; cordoned when cordon is true), after the
// loop observed the node without them.
func (f *fixture) takenByScaleDown(t *testing.T, node string, cordon bool) {
	t.Helper()
	n := f.node(t, node)
	n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: ScaleDownTaint, Value: "1700000000", Effect: apiv1.TaintEffectNoSchedule})
	n.Spec.Unschedulable = n.Spec.Unschedulable || cordon
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCordonRefusesANodeScaleDownTook: scale-down tainted the node
// ToBeDeletedByClusterAutoscaler (and cordoned it) after the loop observed
// it: the engine's cordon reads the node's taints fresh and refuses it. The
// plan ends cancelled (ScaleDownRemoving) before anything is asked or
// written: no replacement, no taint of the engine's, scale-down's cordon and
// taint left as they are, nothing deleted.
func TestCordonRefusesANodeScaleDownTook(t *testing.T) {
	f := newFixture(t, Options{Budget: fixedBudget(100)}, readyNode("a", nil))
	f.takenByScaleDown(t, "a", true)
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"a"},
		Replacement: []Replacement{{Group: "g", Count: 1}}}}})
	f.loop(0)
	n := f.node(t, "a")
	if hasTaintKey(n, Taint) || n.Annotations[scaleDownDisabled] != "" {
		t.Errorf("the engine wrote on a node scale-down is removing: taints %v, annotations %v", n.Spec.Taints, n.Annotations)
	}
	if !n.Spec.Unschedulable || !hasTaintKey(n, ScaleDownTaint) {
		t.Errorf("scale-down's cordon or taint undone: unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if got := f.calls("IncreaseSize"); got != 0 {
		t.Errorf("%d replacements asked for, want none", got)
	}
	if got := f.deleted(); len(got) != 0 {
		t.Errorf("deleted %v, want nothing", got)
	}
	if p := f.phase("a"); p != "" {
		t.Errorf("plan still in flight in phase %s", p)
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "DisruptionCancelled") || !strings.Contains(ev, "ScaleDownRemoving") {
		t.Errorf("events %q, want DisruptionCancelled saying ScaleDownRemoving", ev)
	}
	if got := f.decisions(Drifted, ActionCancelled); got != 1 {
		t.Errorf("cancelled decisions %v, want 1", got)
	}
}

// TestCordonRefusalGivesTheSetBack: a set of two nodes whose second one
// scale-down took after the loop observed it: the first, cordoned already,
// is given back as it was; the second keeps scale-down's state.
func TestCordonRefusalGivesTheSetBack(t *testing.T) {
	f := newFixture(t, Options{Budget: fixedBudget(100)}, readyNode("a", nil), readyNode("b", nil))
	f.takenByScaleDown(t, "b", false)
	f.healer.AddSource(&fakeSource{reason: Consolidatable, cands: []Candidate{{Nodes: []string{"a", "b"}}}})
	for i := 0; i < 3; i++ {
		f.loop(0)
	}
	a, b := f.node(t, "a"), f.node(t, "b")
	if a.Spec.Unschedulable || hasTaintKey(a, Taint) || a.Annotations[scaleDownDisabled] != "" {
		t.Errorf("node a not given back: unschedulable %v, taints %v, annotations %v", a.Spec.Unschedulable, a.Spec.Taints, a.Annotations)
	}
	if hasTaintKey(b, Taint) || !hasTaintKey(b, ScaleDownTaint) {
		t.Errorf("node b: taints %v, want scale-down's only", b.Spec.Taints)
	}
	if got := f.deleted(); len(got) != 0 {
		t.Errorf("deleted %v, want nothing", got)
	}
	if len(f.healer.st.Heals) != 0 {
		t.Errorf("plans in flight: %v", f.healer.st.Heals)
	}
}

// TestHealCordonRefusesANodeScaleDownTook: a heal asked for with the
// annotation, of a node scale-down took after the loop observed it, ends
// cancelled without touching the node.
func TestHealCordonRefusesANodeScaleDownTook(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("a", map[string]string{Annotation: "test"}))
	f.takenByScaleDown(t, "a", false)
	f.loop(0)
	n := f.node(t, "a")
	if hasTaintKey(n, Taint) || n.Spec.Unschedulable || n.Annotations[scaleDownDisabled] != "" {
		t.Errorf("the heal wrote on a node scale-down is removing: unschedulable %v, taints %v, annotations %v",
			n.Spec.Unschedulable, n.Spec.Taints, n.Annotations)
	}
	if got := f.calls("IncreaseSize") + len(f.deleted()); got != 0 {
		t.Errorf("%d increases or deletions, want none", got)
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "HealCancelled") || !strings.Contains(ev, "ScaleDownRemoving") {
		t.Errorf("events %q, want HealCancelled saying ScaleDownRemoving", ev)
	}
}
