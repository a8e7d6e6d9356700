package disruption

import (
	"context"
	"testing"
	"time"
)

// loopBudget allows none until refreshed for the loop's time, then one per
// group (less the group's nodes in flight): the engine must refresh it
// before it asks.
type loopBudget struct {
	refreshed []time.Time
}

func (b *loopBudget) Refresh(_ context.Context, now time.Time) {
	b.refreshed = append(b.refreshed, now)
}

func (b *loopBudget) Allowed(_ string, _ Reason, _, disrupting int, now time.Time) int {
	if len(b.refreshed) == 0 || !b.refreshed[len(b.refreshed)-1].Equal(now) {
		return 0
	}
	return max(0, 1-disrupting)
}

// TestLoopBudgetRefreshedEachLoop: a budget that reads the node groups' own
// budgets (budget.PerGroup) is refreshed with the loop's time before the
// intake asks it, once per Repair; its answer holds (one node at a time).
// Without the refresh it allows none.
func TestLoopBudgetRefreshedEachLoop(t *testing.T) {
	b := &loopBudget{}
	f := newFixture(t, Options{Budget: b}, readyNode("a", nil), readyNode("b", nil), readyNode("c", nil))
	f.healer.AddSource(&fakeSource{reason: Expired, cands: []Candidate{{Nodes: []string{"a"}}, {Nodes: []string{"b"}}, {Nodes: []string{"c"}}}})
	f.loop(0)
	if len(b.refreshed) != 1 || !b.refreshed[0].Equal(t0) {
		t.Fatalf("refreshed at %v, want once at the loop's time %v", b.refreshed, t0)
	}
	if got := f.decisions(Expired, ActionStarted); got != 1 {
		t.Errorf("%v plans started, want 1 (the group's budget of one node)", got)
	}
	if got := f.decisions(Expired, ActionSkippedBudget); got != 2 {
		t.Errorf("skipped_budget %v, want 2", got)
	}
	f.loop(time.Minute)
	if len(b.refreshed) != 2 {
		t.Errorf("refreshed %d times in 2 loops, want 2", len(b.refreshed))
	}
	// The first plan (no replacement, no pods) finished in its loop: the
	// next node goes, one only.
	if got := f.decisions(Expired, ActionStarted); got != 2 {
		t.Errorf("%v plans started after 2 loops, want 2 (one a loop)", got)
	}
}
