package disruption

import (
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

// TestBookedNodesKeptFromVoluntaryReasonsOnly: a node whose free room a
// ProvisioningRequest books (the Protected hook says so, naming the
// request) is kept from drift, expiry and consolidation, each decision
// counted as skipped_protected; an interruption still takes it (the
// instance goes anyway), as it takes an all-or-nothing request's node.
func TestBookedNodesKeptFromVoluntaryReasonsOnly(t *testing.T) {
	const why = "ProvisioningRequest ns/req: capacity booked on the node (check-capacity.autoscaling.x-k8s.io, 2 pods)"
	var asked []string
	booked := func(n string) (bool, string) {
		asked = append(asked, n)
		return n == "booked", why
	}
	for _, r := range []Reason{Drifted, Expired, Consolidatable} {
		t.Run(string(r), func(t *testing.T) {
			asked = nil
			f := newFixture(t, Options{Budget: fixedBudget(100), Protected: booked}, readyNode("booked", nil))
			f.healer.AddSource(&fakeSource{reason: r, cands: []Candidate{{Nodes: []string{"booked"}}}})
			for i := 0; i < 3; i++ {
				f.loop(0)
			}
			if got := f.deleted(); len(got) != 0 {
				t.Errorf("deleted %v, want the booked node kept", got)
			}
			if n := f.node(t, "booked"); n.Spec.Unschedulable || len(n.Spec.Taints) > 0 {
				t.Errorf("booked node touched: unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
			}
			if got := f.decisions(r, ActionSkippedProtected); got != 3 {
				t.Errorf("skipped_protected %v, want 3 (one a loop)", got)
			}
			if len(asked) == 0 {
				t.Error("the Protected hook was never asked")
			}
		})
	}
	t.Run("interrupted", func(t *testing.T) {
		f := newFixture(t, Options{Budget: fixedBudget(100), Protected: booked}, readyNode("booked", nil))
		f.healer.AddSource(&fakeSource{reason: Interrupted, cands: []Candidate{{Nodes: []string{"booked"}}}})
		for i := 0; i < 4 && len(f.deleted()) == 0; i++ {
			f.loop(0)
		}
		if got := f.deleted(); len(got) != 1 || got[0] != "g:booked" {
			t.Errorf("deleted %v, want the interrupted node removed whatever its booking", got)
		}
		if got := f.decisions(Interrupted, ActionSkippedProtected); got != 0 {
			t.Errorf("skipped_protected %v for an interruption, want 0", got)
		}
	})
}

// TestBookingAfterStartCancelsBeforeDrain: a booking that lands on a node
// after its drift plan started (the request answered in the same loop)
// cancels the plan before its drain, the node given back uncordoned and
// untainted, with the request named in the log-facing reason.
func TestBookingAfterStartCancelsBeforeDrain(t *testing.T) {
	held := false
	f := newFixture(t, Options{Budget: fixedBudget(100), Protected: func(n string) (bool, string) {
		return held && n == "a", "ProvisioningRequest ns/req: capacity booked on the node"
	}}, readyNode("a", nil))
	f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Nodes: []string{"a"},
		Replacement: []Replacement{{Group: "g", Count: 1}}}}})
	f.loop(0)
	if n := f.node(t, "a"); !n.Spec.Unschedulable {
		t.Fatal("the plan did not start: node a not cordoned")
	}
	held = true
	for i := 1; i < 4; i++ {
		f.loop(0)
	}
	n := f.node(t, "a")
	if n.Spec.Unschedulable || hasTaint(n, Taint) {
		t.Errorf("node a not given back: unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if got := f.deleted(); len(got) != 0 {
		t.Errorf("deleted %v, want nothing", got)
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "DisruptionCancelled") {
		t.Errorf("events %q, want DisruptionCancelled", ev)
	}
}

func hasTaint(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
