package explain

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNodeDisruptionVerdicts: the disruption verdicts join the node's
// scale-down verdict (or stand alone when scale-down had none), sorted by
// reason, in the text and JSON answers.
func TestNodeDisruptionVerdicts(t *testing.T) {
	r := NewRecorder()
	r.BeginLoop(loopAt)
	r.SetNodes([]NodeVerdict{{Node: "n1", NodeGroup: "a", Reason: "NotUnderutilized"}}, "")
	r.AddDisruption(DisruptionVerdict{Node: "n1", NodeGroup: "a", Reason: "expired", Decision: DecisionNo,
		Why: "younger than its node group's maximum lifetime"})
	r.AddDisruption(DisruptionVerdict{Node: "n1", NodeGroup: "a", Reason: "drifted", Decision: DecisionHeld,
		Why: "node drifted from the template of node group a", Replacement: "1 of a", HeldBy: HeldByBudget,
		Hold: "node group a: 1 of its 4 nodes in flight; the budget allows 0 more"})
	r.AddDisruption(DisruptionVerdict{Node: "n2", NodeGroup: "b", Reason: "consolidatable", Decision: DecisionProposed,
		Why: "replace by a cheaper node", SavingPerHour: 0.25, Replacement: "1 of small", Nodes: []string{"n2", "n3"}})
	r.EndLoop()

	v, _, _, ok := r.Node("n1")
	if !ok {
		t.Fatal("n1 not explained")
	}
	if got := []string{v.Disruptions[0].Reason, v.Disruptions[1].Reason}; !cmp.Equal(got, []string{"drifted", "expired"}) {
		t.Errorf("reasons %v, want drifted then expired", got)
	}
	code, body := get(t, r, "node=n1")
	for _, want := range []string{"Verdict:     kept", "Disruption:",
		"  REASON   DECISION            SAVING/H  REPLACEMENT  WHY",
		"  drifted  held back (budget)  -         1 of a       node drifted from the template of node group a; held: node group a: 1 of its 4 nodes in flight; the budget allows 0 more",
		"  expired  no                  -         -            younger than its node group's maximum lifetime"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("node=n1: %d, body lacks %q:\n%s", code, want, body)
		}
	}
	code, body = get(t, r, "node=n2")
	for _, want := range []string{"Verdict:     no scale-down verdict",
		"consolidatable  proposed  0.2500    1 of small   replace by a cheaper node [with n2, n3]"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("node=n2: %d, body lacks %q:\n%s", code, want, body)
		}
	}
	code, body = get(t, r, "node=n2&format=json")
	var got struct {
		NoScaleDownVerdict bool                `json:"noScaleDownVerdict"`
		Disruptions        []DisruptionVerdict `json:"disruptions"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != 200 {
		t.Fatalf("node=n2 JSON: %d, %v:\n%s", code, err, body)
	}
	want := []DisruptionVerdict{{Reason: "consolidatable", Decision: DecisionProposed, Why: "replace by a cheaper node",
		SavingPerHour: 0.25, Replacement: "1 of small", Nodes: []string{"n2", "n3"}}}
	if !got.NoScaleDownVerdict || !cmp.Equal(want, got.Disruptions) {
		t.Errorf("node=n2 JSON: noScaleDownVerdict %v, disruptions (-want +got):\n%s", got.NoScaleDownVerdict,
			cmp.Diff(want, got.Disruptions))
	}
	if code, _ := get(t, r, "node=n9"); code != 404 {
		t.Errorf("node=n9: %d, want 404", code)
	}
}
