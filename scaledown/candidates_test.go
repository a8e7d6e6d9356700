package scaledown

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// --unremovable-node-recheck-timeout: a node the simulation found
// unremovable is not simulated again until the timeout passed.
func TestUnremovableNodeRecheck(t *testing.T) {
	for _, tc := range []struct {
		timeout            time.Duration
		wantAfterOneMinute string
	}{
		{5 * time.Minute, ReasonRecentlyUnremovable},
		{0, ReasonNotUnneededLongEnough},
	} {
		f := newFixture(t, 0, map[string]string{"blocked": "1"}, func(o *fixtureOptions) { o.UnremovableNodeRecheckTimeout = tc.timeout })
		f.sess.full["blocked"] = true
		if r := f.plan(t, t0).Unremovable["blocked"]; r != ReasonNoPlaceToMovePods {
			t.Fatalf("timeout %v: first loop %q", tc.timeout, r)
		}
		f.sess.full["blocked"] = false // room appeared
		if r := f.plan(t, t0.Add(time.Minute)).Unremovable["blocked"]; r != tc.wantAfterOneMinute {
			t.Errorf("timeout %v: a minute later %q, want %q", tc.timeout, r, tc.wantAfterOneMinute)
		}
		plan := f.plan(t, t0.Add(5*time.Minute))
		if !names(plan.Unneeded)["blocked"] {
			t.Errorf("timeout %v: not unneeded once the timeout passed: %q", tc.timeout, plan.Unremovable["blocked"])
		}
	}
}

func manyNodes(empty, full int) map[string]string {
	nodes := map[string]string{}
	for i := 0; i < empty; i++ {
		nodes[fmt.Sprintf("empty-%02d", i)] = ""
	}
	for i := 0; i < full; i++ {
		nodes[fmt.Sprintf("busy-%02d", i)] = "1"
	}
	return nodes
}

// counts returns, of the nodes named prefix*, how many are unneeded and
// how many unremovable for another reason than their unneeded time.
func counts(plan *Plan, prefix string) (unneeded, unremovable int) {
	for _, c := range plan.Unneeded {
		if strings.HasPrefix(c.Node.Name, prefix) {
			unneeded++
		}
	}
	for n, r := range plan.Unremovable {
		if strings.HasPrefix(n, prefix) && r != ReasonNotUnneededLongEnough {
			unremovable++
		}
	}
	return unneeded, unremovable
}

// --scale-down-non-empty-candidates-count caps the non-empty nodes newly
// found unneeded per loop, --scale-down-candidates-pool-* the non-candidates
// simulated per loop; empty nodes are never limited, and the previous
// candidates come first and are all checked again.
func TestCandidateLimits(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		count, poolMin          int
		ratio                   float64
		wantBusy, wantBusyAfter int
	}{
		{"defaults: 30 of 20 nodes, pool max(2, 50)", 30, 50, 0.1, 20, 20},
		{"count 3", 3, 50, 0.1, 3, 6},
		{"pool of 4 (ratio 0.1 of 24 rounds up to 3, min 4)", 30, 4, 0.1, 4, 8},
		{"count 0 lifts the limits", 0, 1, 0, 20, 20},
	} {
		f := newFixture(t, 0, manyNodes(4, 20), func(o *fixtureOptions) {
			o.ScaleDownNonEmptyCandidatesCount, o.ScaleDownCandidatesPoolMinCount, o.ScaleDownCandidatesPoolRatio =
				tc.count, tc.poolMin, tc.ratio
		})
		plan := f.plan(t, t0)
		busy, busyUnremovable := counts(plan, "busy")
		empty, _ := counts(plan, "empty")
		if busy != tc.wantBusy || empty != 4 {
			t.Errorf("%s: %d busy and %d empty unneeded, want %d and 4", tc.name, busy, empty, tc.wantBusy)
		}
		// The rest is left out: neither unneeded nor unremovable.
		if busyUnremovable != 0 || len(plan.Unremovable) != busy+empty {
			t.Errorf("%s: %d busy nodes unremovable, %d reasons in all: the nodes left out must get none", tc.name,
				busyUnremovable, len(plan.Unremovable))
		}
		// Next loop: the candidates stay (their timers run on), more come
		// from the pool, as many as the count allows.
		first := names(plan.Unneeded)
		plan = f.plan(t, t0.Add(10*time.Second))
		if busy, _ := counts(plan, "busy"); busy != tc.wantBusyAfter {
			t.Errorf("%s: second loop %d busy unneeded, want %d", tc.name, busy, tc.wantBusyAfter)
		}
		for _, c := range plan.Unneeded {
			if first[c.Node.Name] && !c.Since.Equal(t0) {
				t.Errorf("%s: %s lost its timer", tc.name, c.Node.Name)
			}
		}
	}
}

// slowSession makes every simulation take 10 s on the planner's clock.
type slowSession struct {
	*session
	clk *clocktesting.FakePassiveClock
}

func (s slowSession) TryRemove(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool {
	s.clk.SetTime(s.clk.Now().Add(10 * time.Second))
	return s.session.TryRemove(ctx, node, move, avoid)
}

// --scale-down-simulation-timeout leaves the nodes after the budget out;
// --max-node-skip-eval-time-tracker-enabled tracks how long they waited.
func TestSimulationTimeoutAndSkipTracker(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	f := newFixture(t, 0, manyNodes(0, 6), func(o *fixtureOptions) {
		o.ScaleDownSimulationTimeout = 25 * time.Second
		o.MaxNodeSkipEvalTimeTrackerEnabled = true
	})
	f.planner.clock = clk
	sess := slowSession{f.sess, clk}
	run := func(now time.Time) *Plan {
		nodes := f.nodes
		if err := f.state.Update(context.Background(), f.p, nodes, now); err != nil {
			t.Fatal(err)
		}
		return f.planner.Update(context.Background(), Input{Now: now, Nodes: nodes, ScheduledPods: f.pods, State: f.state,
			Session: sess})
	}
	plan := run(t0)
	if busy, unremovable := counts(plan, "busy"); busy != 3 || unremovable != 0 {
		t.Errorf("%d unneeded and %d unremovable within 25 s of 10 s simulations, want 3 and none", busy, unremovable)
	}
	if d, on := f.planner.MaxNodeSkipEval(); !on || d != 0 {
		t.Errorf("first loop: skip eval %v %v, want 0 true", d, on)
	}
	// A minute later: the three candidates come first and use the budget
	// again; the other three wait a second loop.
	run(t0.Add(time.Minute))
	if d, _ := f.planner.MaxNodeSkipEval(); d != time.Minute {
		t.Errorf("second loop: skip eval %v, want 1m", d)
	}
	f2 := newFixture(t, 0, manyNodes(0, 1), nil)
	if _, on := f2.planner.MaxNodeSkipEval(); on {
		t.Error("tracker on without the flag")
	}
}
