package lifecycle

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// endingGroup is a node group that says its reservation's end (ok false:
// it has none, as an On-Demand Capacity Reservation's group).
type endingGroup struct {
	cloudprovider.NodeGroup
	end cloudprovider.ReservationEnd
	ok  bool
}

func (g endingGroup) ReservationEnd() (cloudprovider.ReservationEnd, bool) { return g.end, g.ok }

// byNode is a GroupLookup by node name.
type byNode map[string]cloudprovider.NodeGroup

func (m byNode) NodeGroupForNode(_ context.Context, n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	return m[n.Name], nil
}

func TestReservationEndProposesTheNodesOfEndingBlocksOnly(t *testing.T) {
	p, _ := cluster(map[string][]*apiv1.Node{})
	groups, err := p.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]cloudprovider.NodeGroup{}
	for _, g := range groups {
		base[g.Id()] = g
	}
	end := t0.Add(time.Hour)
	later := t0.Add(2 * time.Hour)
	block := endingGroup{NodeGroup: base["a"], end: cloudprovider.ReservationEnd{ID: "cr-block", End: end}, ok: true}
	laterBlock := endingGroup{NodeGroup: base["b"], end: cloudprovider.ReservationEnd{ID: "cr-later", End: later}, ok: true}
	odcr := endingGroup{NodeGroup: base["c"]} // a reservation without an end
	nodes := []*apiv1.Node{node("b1", t0), node("b2", t0), notReady(node("b-sick", t0)), deleting(node("b-going", t0)),
		node("l1", t0), node("o1", t0), node("plain", t0), node("stray", t0)}
	lookup := byNode{"b1": block, "b2": block, "b-sick": block, "b-going": block, "l1": laterBlock, "o1": odcr, "plain": base["c"]}
	s := NewReservationEnd(lookup, 10*time.Minute)
	if s.Reason() != disruption.ReservationEnding {
		t.Fatalf("reason %s", s.Reason())
	}
	propose := func(now time.Time) []string {
		var out []string
		for _, c := range s.Propose(context.Background(), &processors.Loop{Now: now, Nodes: nodes}) {
			if c.Reason != disruption.ReservationEnding || len(c.Nodes) != 1 || len(c.Replacement) != 0 {
				t.Errorf("candidate %+v: want one node, reason %s, no replacement", c, disruption.ReservationEnding)
			}
			if !strings.Contains(c.Message, "cr-") || !strings.Contains(c.Message, "ends at") {
				t.Errorf("message %q names no reservation or end", c.Message)
			}
			out = append(out, c.Nodes[0])
		}
		return out
	}
	for _, tc := range []struct {
		at     time.Time
		want   []string
		ending []string
	}{
		{at: end.Add(-10*time.Minute - time.Second)},
		{at: end.Add(-10 * time.Minute), want: []string{"b1", "b2"}, ending: []string{"b-sick", "b1", "b2"}},
		{at: end.Add(time.Minute), want: []string{"b1", "b2"}, ending: []string{"b-sick", "b1", "b2"}},
		// The earliest end first.
		{at: later.Add(-time.Minute), want: []string{"b1", "b2", "l1"}, ending: []string{"b-sick", "b1", "b2", "l1"}},
	} {
		got := propose(tc.at)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("at end%+v: proposed (-want +got):\n%s", tc.at.Sub(end), diff)
		}
		var ending []string
		for n, e := range s.Ending() {
			ending = append(ending, n)
			if want := lookup[n].(endingGroup).end; e.ReservationEnd != want || e.Group != lookup[n].Id() {
				t.Errorf("Ending()[%s] = %+v, want %+v of group %s", n, e, want, lookup[n].Id())
			}
		}
		if diff := cmp.Diff(tc.ending, slices.Sorted(slices.Values(ending))); diff != "" {
			t.Errorf("at end%+v: ending nodes (-want +got):\n%s", tc.at.Sub(end), diff)
		}
	}
}

func TestReservationEndWithoutDrainWindowProposesFromTheEnd(t *testing.T) {
	p, _ := cluster(map[string][]*apiv1.Node{})
	end := t0.Add(time.Hour)
	groups, err := p.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := endingGroup{NodeGroup: groups[0], end: cloudprovider.ReservationEnd{ID: "cr-1", End: end}, ok: true}
	s := NewReservationEnd(byNode{"n": g}, 0)
	nodes := []*apiv1.Node{node("n", t0)}
	if got := s.Propose(context.Background(), &processors.Loop{Now: end.Add(-time.Second), Nodes: nodes}); len(got) != 0 {
		t.Errorf("before the end: %+v, want none", got)
	}
	if got := s.Propose(context.Background(), &processors.Loop{Now: end, Nodes: nodes}); len(got) != 1 {
		t.Errorf("at the end: %+v, want the node", got)
	}
}

// TestReservationEndRemembersNodesGoneInTheWindow: a node seen in the drain
// window and deleted since (its drain can finish in the loop that first saw
// it) stays in Ending until its reservation's end, so that a
// ProvisioningRequest on it is still revoked; a node seen again outside the
// window (its block extended) is not kept.
func TestReservationEndRemembersNodesGoneInTheWindow(t *testing.T) {
	p, _ := cluster(map[string][]*apiv1.Node{})
	groups, err := p.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(time.Hour)
	block := endingGroup{NodeGroup: groups[0], end: cloudprovider.ReservationEnd{ID: "cr-1", End: end}, ok: true}
	extended := endingGroup{NodeGroup: groups[0], end: cloudprovider.ReservationEnd{ID: "cr-1", End: end.Add(time.Hour)}, ok: true}
	lookup := byNode{"gone": block, "kept": block}
	s := NewReservationEnd(lookup, 10*time.Minute)
	ending := func(now time.Time, nodes ...*apiv1.Node) []string {
		s.Propose(context.Background(), &processors.Loop{Now: now, Nodes: nodes})
		return slices.Sorted(func(yield func(string) bool) {
			for n := range s.Ending() {
				if !yield(n) {
					return
				}
			}
		})
	}
	for _, tc := range []struct {
		name  string
		at    time.Time
		nodes []*apiv1.Node
		want  []string
	}{
		{"both in the window", end.Add(-5 * time.Minute), []*apiv1.Node{node("gone", t0), node("kept", t0)}, []string{"gone", "kept"}},
		{"one deleted", end.Add(-4 * time.Minute), []*apiv1.Node{node("kept", t0)}, []string{"gone", "kept"}},
		{"the other's block extended", end.Add(-3 * time.Minute), []*apiv1.Node{node("kept", t0)}, []string{"gone"}},
		{"the end", end, []*apiv1.Node{node("kept", t0)}, nil},
	} {
		if tc.name == "the other's block extended" {
			lookup["kept"] = extended
		}
		if diff := cmp.Diff(tc.want, ending(tc.at, tc.nodes...)); diff != "" {
			t.Errorf("%s: ending nodes (-want +got):\n%s", tc.name, diff)
		}
	}
}
