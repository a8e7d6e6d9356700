package framework

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

func antiAffinityPod(name string) *testbuild.PodBuilder {
	return makePod(name, "100m").Label("app", "db").AntiAffinity("app", "db")
}

// TestAffinityListsFollowChanges: the lists of nodes running pods with
// inter-pod terms, which the InterPodAffinity plugin asks for with every
// pod it checks, always hold the snapshot's current NodeInfos of exactly
// those nodes, through pods and nodes added and removed, copies on write,
// Revert and Commit; and placing a pod without such terms on a node without
// any leaves them built (before, every change dropped them, and the drain
// simulation of 2,000 nodes among 15,000 rebuilt them from all the nodes for
// every pod it moved).
func TestAffinityListsFollowChanges(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("a", "4").Obj(), makeNode("b", "4").Obj(), makeNode("c", "4").Obj()},
		[]*apiv1.Pod{antiAffinityPod("db-0").On("a").Obj()})
	check := func(step string, want ...string) {
		t.Helper()
		lister := s.NodeInfos()
		got, err := lister.HavePodsWithRequiredAntiAffinityList()
		if err != nil {
			t.Fatal(err)
		}
		withAffinity, _ := lister.HavePodsWithAffinityList()
		if diff := cmp.Diff(want, nodeNamesOf(got)); diff != "" {
			t.Errorf("%s: nodes with required anti-affinity (-want +got):\n%s", step, diff)
		}
		if diff := cmp.Diff(want, nodeNamesOf(withAffinity)); diff != "" {
			t.Errorf("%s: nodes with affinity (-want +got):\n%s", step, diff)
		}
		for _, ni := range got {
			if cur, _ := s.NodeInfo(ni.Node().Name); fwk.NodeInfo(cur) != ni {
				t.Errorf("%s: the list holds a stale NodeInfo of %s", step, ni.Node().Name)
			}
		}
	}
	check("start", "a")
	built := s.lists()
	if err := s.AddPod(makePod("plain", "1").Obj(), "b"); err != nil {
		t.Fatal(err)
	}
	if s.lists() != built {
		t.Error("a pod without inter-pod terms on a node without any rebuilt the lists")
	}
	check("plain pod on b", "a")

	s.Fork()
	if err := s.AddPod(makePod("plain-a", "1").Obj(), "a"); err != nil { // a copied on write
		t.Fatal(err)
	}
	check("plain pod on a, forked", "a")
	if err := s.AddPod(antiAffinityPod("db-1").Obj(), "c"); err != nil {
		t.Fatal(err)
	}
	check("anti-affinity pod on c", "a", "c")
	if err := s.RemoveNode("a"); err != nil {
		t.Fatal(err)
	}
	check("a removed", "c")
	twin := makeNode("twin", "4").Obj()
	if err := s.CopyNode("c", twin); err != nil {
		t.Fatal(err)
	}
	check("copy of c", "c", "twin")
	s.Revert()
	check("reverted", "a")

	s.Fork()
	if err := s.RemovePod(antiAffinityPod("db-0").On("a").Obj(), "a"); err != nil {
		t.Fatal(err)
	}
	check("db-0 removed, forked")
	s.Fork()
	if err := s.AddNode(makeNode("d", "4").Obj(), antiAffinityPod("db-2").Obj()); err != nil {
		t.Fatal(err)
	}
	check("d added with db-2", "d")
	s.Commit()
	check("committed", "d")
	s.Revert()
	check("all reverted", "a")
}

func nodeNamesOf(list []fwk.NodeInfo) []string {
	var out []string
	for _, ni := range list {
		out = append(out, ni.Node().Name)
	}
	return out
}

// TestRemoveNodeKeepsOrderAndRewritesNoOtherEntry: removing a node leaves
// the others' index entries as they were (before, every node after the
// removed one was re-indexed: 13,000 map writes per candidate in the drain
// simulation of 2,000 of 15,000 nodes), and nodes removed, added and put
// back by Revert keep the snapshot's order.
func TestRemoveNodeKeepsOrderAndRewritesNoOtherEntry(t *testing.T) {
	var nodes []*apiv1.Node
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		nodes = append(nodes, makeNode(n, "4").Obj())
	}
	s := NewSnapshot(nodes, nil)
	before := maps.Clone(s.index)
	s.Fork()
	for _, n := range []string{"b", "d"} {
		if err := s.RemoveNode(n); err != nil {
			t.Fatal(err)
		}
	}
	for name, entry := range s.index {
		if entry != before[name] {
			t.Errorf("removing b and d rewrote the entry of %s", name)
		}
	}
	if err := s.AddNode(makeNode("f", "4").Obj()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "c", "e", "f"}, s.NodeNames()); diff != "" {
		t.Errorf("after removals and an addition (-want +got):\n%s", diff)
	}
	if err := s.AddPod(makePod("p", "1").Obj(), "e"); err != nil { // e copied on write, in place
		t.Fatal(err)
	}
	if ni, _ := s.NodeInfo("e"); s.list[2] != fwk.NodeInfo(ni) {
		t.Error("the copy of e is not at e's position")
	}
	s.Revert()
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e"}, s.NodeNames()); diff != "" {
		t.Errorf("after Revert (-want +got):\n%s", diff)
	}
	for i, name := range s.NodeNames() {
		if ni, _ := s.NodeInfo(name); s.list[i] != fwk.NodeInfo(ni) || s.pos(name) != i {
			t.Errorf("%s is not at its position %d", name, i)
		}
	}
}
