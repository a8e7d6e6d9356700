package scaleup

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// TestReplayRemovalLeavesTheSessionAsTheSimulation: one session simulates
// the removal of every node of a cluster in turn (TryRemoveWalk, recording
// where each pod went); a second, built alike, replays each outcome from
// those destinations (ReplayRemoval). After every step the two hold the
// same pods on the same nodes, the same pods moved per node, and the same
// cursor: removals that went (committed) and removals refused after some
// of their pods were placed (only the cursor moved, counted without the
// node, before and after the destinations in the list).
func TestReplayRemovalLeavesTheSessionAsTheSimulation(t *testing.T) {
	const nodeCount = 10
	names := make([]string, nodeCount)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
	}
	// Nodes of 4 CPUs: the first ones nearly empty, then fuller ones, so
	// that early removals go, later ones are refused part way.
	cpu := []string{"300m", "500m", "1", "1500m", "2", "2500m", "3", "3", "3500m", "3500m"}
	var pods []*apiv1.Pod
	for i, n := range names {
		for k, p := range workloadPods("w"+n, 2, cpu[i], nil) {
			p.Name = fmt.Sprintf("%s-%d", n, k)
			p.Spec.NodeName = n
			pods = append(pods, p)
		}
	}
	ctx := context.Background()
	type state struct {
		Cursor    int
		Placement map[string][]string
		Moved     map[string][]string
	}
	stateOf := func(s *Session) state {
		st := state{Cursor: s.moveNext, Placement: map[string][]string{}, Moved: map[string][]string{}}
		for _, n := range s.o.sim.Snapshot().NodeNames() {
			for _, p := range s.PodsOn(n) {
				st.Placement[n] = append(st.Placement[n], p.Name)
			}
			sort.Strings(st.Placement[n])
		}
		for n, ps := range s.moved {
			for _, p := range ps {
				st.Moved[n] = append(st.Moved[n], p.Name)
			}
			sort.Strings(st.Moved[n])
		}
		return st
	}
	simulated, replayed := sessionOn(t, names, "8", pods), sessionOn(t, names, "8", pods)
	byNode := byNode(pods)
	removed := map[string]bool{}
	went, refusedAfterPlacing := 0, 0
	// Twice over the nodes: the second pass moves the pods the first moved
	// onto the nodes that stayed (carried pods).
	for pass := range 2 {
		for _, n := range names {
			if removed[n] {
				continue
			}
			var w framework.Walk
			err := simulated.TryRemoveWalk(ctx, n, byNode[n], removed, &w)
			if rerr := replayed.ReplayRemoval(ctx, n, byNode[n], w.Dest, err == nil); rerr != nil {
				t.Fatalf("pass %d, %s: replay: %v", pass, n, rerr)
			}
			if err == nil {
				removed[n] = true
				went++
			} else if len(w.Dest) > 0 {
				refusedAfterPlacing++
			}
			if diff := cmp.Diff(stateOf(simulated), stateOf(replayed)); diff != "" {
				t.Fatalf("pass %d, after %s (went: %v, placed %v): the replay differs (-simulated +replayed):\n%s",
					pass, n, err == nil, w.Dest, diff)
			}
		}
	}
	if went == 0 || refusedAfterPlacing == 0 {
		t.Fatalf("%d removals went, %d were refused after placing pods: the test needs both", went, refusedAfterPlacing)
	}
	if err := replayed.ReplayRemoval(ctx, "n09", byNode["n09"], []string{"n08"}, true); err == nil {
		t.Error("a replay with fewer destinations than pods was accepted")
	}
}
