package scaledown

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingSession counts the simulations of busy nodes and makes each take
// step on the planner's clock.
type countingSession struct {
	*session
	clk   *clocktesting.FakePassiveClock
	step  time.Duration
	tried int
}

func (s *countingSession) TryRemove(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool {
	s.clk.SetTime(s.clk.Now().Add(s.step))
	if strings.HasPrefix(node, "busy") {
		s.tried++
	}
	return s.session.TryRemove(ctx, node, move, avoid)
}

// rotationFixture is a fixture whose simulations are counted (and timed on
// the planner's own clock).
type rotationFixture struct {
	*fixture
	sess *countingSession
}

func newRotationFixture(t *testing.T, nodes map[string]string, opts func(*fixtureOptions)) *rotationFixture {
	t.Helper()
	f := newFixture(t, 0, nodes, opts)
	clk := clocktesting.NewFakePassiveClock(t0)
	f.planner.clock = clk
	return &rotationFixture{fixture: f, sess: &countingSession{session: f.sess, clk: clk}}
}

func (f *rotationFixture) plan(t *testing.T, now time.Time) *Plan {
	t.Helper()
	var nodes []*apiv1.Node
	for _, n := range f.nodes {
		cur, err := f.client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, cur)
	}
	if err := f.state.Update(context.Background(), f.p, nodes, now); err != nil {
		t.Fatal(err)
	}
	f.sess.tried = 0
	return f.planner.Update(context.Background(), Input{Now: now, Nodes: nodes, ScheduledPods: f.pods, State: f.state,
		Session: f.sess})
}

// With N busy nodes all removable and a pool of P (count C), every node is
// unneeded within ceil(N/min(P, C))+1 loops: each loop re-checks the nodes
// already unneeded and draws the next P others, going on where the previous
// loop stopped; nodes found unneeded keep the time they were first found.
func TestCandidatesRotateUntilEveryRemovableNodeIsFound(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		busy, count, poolMin int
		// blocked are the first nodes, whose pods cannot move; with the
		// recheck timeout off they are simulated every time they are drawn.
		blocked int
	}{
		{name: "60 nodes, count 30, pool 10", busy: 60, count: 30, poolMin: 10},
		{name: "24 nodes, count 30, pool 5", busy: 24, count: 30, poolMin: 5},
		{name: "40 nodes, count 4 below the pool of 10", busy: 40, count: 4, poolMin: 10},
		{name: "the first 10 blocked, pool 10", busy: 40, count: 30, poolMin: 10, blocked: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRotationFixture(t, manyNodes(0, tc.busy), func(o *fixtureOptions) {
				o.ScaleDownNonEmptyCandidatesCount, o.ScaleDownCandidatesPoolMinCount = tc.count, tc.poolMin
				o.ScaleDownCandidatesPoolRatio = 0.1 // ceil(busy x 0.1) <= poolMin in every case
				o.UnremovableNodeRecheckTimeout = 0
			})
			for i := 0; i < tc.blocked; i++ {
				f.sess.full[fmt.Sprintf("busy-%02d", i)] = true
			}
			removable := tc.busy - tc.blocked
			per := min(tc.count, tc.poolMin)
			bound := int(math.Ceil(float64(removable+tc.blocked)/float64(per))) + 1
			first := map[string]time.Time{}
			loops := 0
			for loops < bound && len(first) < removable {
				now := t0.Add(time.Duration(loops) * 10 * time.Second)
				plan := f.plan(t, now)
				loops++
				if newly := f.sess.tried - len(first); newly > tc.poolMin {
					t.Errorf("loop %d: %d nodes simulated beyond the %d unneeded before, pool %d", loops, newly,
						len(first), tc.poolMin)
				}
				got := map[string]time.Time{}
				for _, c := range plan.Unneeded {
					got[c.Node.Name] = c.Since
				}
				for name, since := range first {
					if got[name] != since {
						t.Errorf("loop %d: %s unneeded since %v, want %v (found then)", loops, name, got[name], since)
					}
				}
				for name, since := range got {
					if _, ok := first[name]; !ok {
						if !since.Equal(now) {
							t.Errorf("loop %d: %s newly unneeded since %v, want %v", loops, name, since, now)
						}
						first[name] = since
					}
				}
			}
			if len(first) != removable {
				t.Errorf("%d of %d removable nodes unneeded after %d loops (bound ceil(N/min(pool, count))+1)",
					len(first), removable, bound)
			}
		})
	}
}

// A node unneeded in an earlier loop and left out of this loop's
// simulation (here: the simulation time ran out) keeps its timer and its
// candidate taint; it is not removable in the loop that left it out.
func TestLeftOutCandidatesKeepTheirTimers(t *testing.T) {
	f := newRotationFixture(t, manyNodes(0, 6), func(o *fixtureOptions) { o.ScaleDownSimulationTimeout = 25 * time.Second })
	f.sess.step = time.Second
	if plan := f.plan(t, t0); len(plan.Unneeded) != 6 {
		t.Fatalf("first loop: %d unneeded, want 6", len(plan.Unneeded))
	}
	// Slow simulations: three of the six fit into the time budget.
	f.sess.step = 10 * time.Second
	plan := f.plan(t, t0.Add(time.Minute))
	if len(plan.Unneeded) != 3 {
		t.Fatalf("slow loop: %d unneeded, want 3", len(plan.Unneeded))
	}
	for _, name := range []string{"busy-03", "busy-04", "busy-05"} {
		if _, ok := plan.Unremovable[name]; ok {
			t.Errorf("slow loop: %s left out but given reason %q", name, plan.Unremovable[name])
		}
		n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasTaint(n, DeletionCandidateTaint) {
			t.Errorf("slow loop: %s lost its candidate taint while left out", name)
		}
	}
	f.sess.step = time.Second
	plan = f.plan(t, t0.Add(2*time.Minute))
	got := map[string]time.Time{}
	for _, c := range plan.Unneeded {
		got[c.Node.Name] = c.Since
	}
	want := map[string]time.Time{}
	for i := 0; i < 6; i++ {
		want[fmt.Sprintf("busy-%02d", i)] = t0
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unneeded since after a loop that left three out (-want +got):\n%s", diff)
	}
	plan = f.plan(t, t0.Add(10*time.Minute+time.Second))
	if len(plan.Removable) == 0 {
		t.Errorf("none removable 10 minutes after all six became unneeded: %v", plan.Unremovable)
	}
}

// A node found unneeded that becomes needed (its pods have nowhere to go
// any more, or it is busy again) drops out at once and its timer is gone:
// when it is unneeded again, the timer starts anew.
func TestCandidateThatBecameNeededDropsOut(t *testing.T) {
	f := newRotationFixture(t, manyNodes(0, 12), func(o *fixtureOptions) {
		o.ScaleDownNonEmptyCandidatesCount, o.ScaleDownCandidatesPoolMinCount = 30, 4
		o.UnremovableNodeRecheckTimeout = 0
	})
	loop := func(i int) (*Plan, time.Time) {
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		return f.plan(t, now), now
	}
	for i := 0; i < 3; i++ {
		loop(i)
	}
	plan, _ := loop(3)
	if len(plan.Unneeded) != 12 {
		t.Fatalf("%d of 12 unneeded after 4 loops of a pool of 4", len(plan.Unneeded))
	}
	f.sess.full["busy-02"] = true // nowhere to move its pod
	f.setPodCPU("busy-07", "3")   // utilisation over the threshold
	plan, _ = loop(4)
	if r := plan.Unremovable["busy-02"]; r != ReasonNoPlaceToMovePods {
		t.Errorf("busy-02: %q, want %q", r, ReasonNoPlaceToMovePods)
	}
	if r := plan.Unremovable["busy-07"]; r != ReasonNotUnderutilized {
		t.Errorf("busy-07: %q, want %q", r, ReasonNotUnderutilized)
	}
	if u := names(plan.Unneeded); len(u) != 10 || u["busy-02"] || u["busy-07"] {
		t.Errorf("unneeded %v, want the ten others", u)
	}
	f.sess.full["busy-02"] = false
	f.setPodCPU("busy-07", "1")
	var back time.Time
	found := map[string]time.Time{}
	for i := 5; i < 10 && len(found) < 2; i++ {
		plan, back = loop(i)
		for _, c := range plan.Unneeded {
			if c.Node.Name == "busy-02" || c.Node.Name == "busy-07" {
				if _, ok := found[c.Node.Name]; !ok {
					found[c.Node.Name] = c.Since
					if !c.Since.Equal(back) {
						t.Errorf("%s unneeded again since %v, want %v (the timer restarts)", c.Node.Name, c.Since, back)
					}
				}
			}
		}
	}
	if len(found) != 2 {
		t.Errorf("unneeded again: %v, want busy-02 and busy-07", found)
	}
}

// The shape of issue 31 with upstream's default limits (count 30, pool
// max(ceil(1,000 x 0.1), 50) = 100): 1,000 non-empty nodes of which 400 cannot
// be removed (with the default recheck timeout); the 600 others are all
// unneeded within ceil(600/30)+1 loops.
func TestRotationAtIssueScale(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 nodes")
	}
	const total, blocked, count = 1000, 400, 30
	nodes := map[string]string{}
	for i := 0; i < total; i++ {
		nodes[fmt.Sprintf("busy-%04d", i)] = "1"
	}
	f := newRotationFixture(t, nodes, nil)
	for i := 0; i < blocked; i++ {
		// Spread over the name order: one node in two and a half.
		f.sess.full[fmt.Sprintf("busy-%04d", i*5/2)] = true
	}
	removable := total - len(f.sess.full)
	bound := (removable+count-1)/count + 1
	loops, unneeded := 0, 0
	for ; loops < bound && unneeded < removable; loops++ {
		unneeded = len(f.plan(t, t0.Add(time.Duration(loops)*10*time.Second)).Unneeded)
	}
	t.Logf("%d of %d removable nodes unneeded after %d loops (bound %d)", unneeded, removable, loops, bound)
	if unneeded != removable {
		t.Errorf("%d of %d removable nodes unneeded after %d loops", unneeded, removable, bound)
	}
}
