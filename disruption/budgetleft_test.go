package disruption

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
)

// TestBudgetLeft: what the consolidation planner is told matches what the
// intake then allows: 10% of a group of 12 rounded up is 2, less the
// group's nodes in flight.
func TestBudgetLeft(t *testing.T) {
	var nodes []*apiv1.Node
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		nodes = append(nodes, readyNode(n, nil))
	}
	f := newSizedFixture(t, Options{}, 0, 20, nodes...) // room for the replacement
	if diff := cmp.Diff(map[string]int{"g": 2}, f.healer.BudgetLeft(context.Background(), Drifted, nodes, t0)); diff != "" {
		t.Errorf("before any plan (-want +got):\n%s", diff)
	}
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"a"}, Replacement: []Replacement{{Group: "g", Count: 1}}}}})
	f.loop(0)
	if got := f.decisions(Drifted, ActionStarted); got != 1 {
		t.Fatalf("%v plans started, want 1", got)
	}
	if diff := cmp.Diff(map[string]int{"g": 1}, f.healer.BudgetLeft(context.Background(), Drifted, nodes, t0)); diff != "" {
		t.Errorf("with one node in flight (-want +got):\n%s", diff)
	}
}
