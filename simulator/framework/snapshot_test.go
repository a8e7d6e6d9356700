package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
)

func podNames(t *testing.T, s *Snapshot, node string) []string {
	t.Helper()
	pods, err := s.Pods(node)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestSnapshotForkRevertCommit(t *testing.T) {
	s := NewSnapshot(
		[]*apiv1.Node{makeNode("n1", "4").obj(), makeNode("n2", "4").obj()},
		[]*apiv1.Pod{makePod("a", "1").on("n1").obj(), makePod("stray", "1").on("gone").obj()},
	)
	before, _ := s.NodeInfo("n1")

	s.Fork()
	if err := s.AddPod(makePod("b", "1").obj(), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddNode(makeNode("n3", "8").obj()); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveNode("n2"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, podNames(t, s, "n1")); diff != "" {
		t.Errorf("forked n1 pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n1", "n3"}, s.NodeNames()); diff != "" {
		t.Errorf("forked nodes (-want +got):\n%s", diff)
	}
	if len(before.Pods) != 1 {
		t.Errorf("the fork changed the original NodeInfo: %d pods", len(before.Pods))
	}
	s.Revert()
	if diff := cmp.Diff([]string{"a"}, podNames(t, s, "n1")); diff != "" {
		t.Errorf("reverted n1 pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n1", "n2"}, s.NodeNames()); diff != "" {
		t.Errorf("reverted nodes (-want +got):\n%s", diff)
	}
	if after, _ := s.NodeInfo("n1"); after != before {
		t.Error("revert did not restore the original NodeInfo")
	}

	// Nested: the inner level is committed into the outer, which reverts both.
	s.Fork()
	_ = s.AddPod(makePod("outer", "1").obj(), "n2")
	s.Fork()
	_ = s.AddPod(makePod("inner", "1").obj(), "n2")
	_ = s.AddPod(makePod("inner2", "1").obj(), "n1")
	s.Commit()
	if diff := cmp.Diff([]string{"outer", "inner"}, podNames(t, s, "n2")); diff != "" {
		t.Errorf("after inner commit (-want +got):\n%s", diff)
	}
	s.Revert()
	if got := podNames(t, s, "n2"); len(got) != 0 {
		t.Errorf("outer revert left %v on n2", got)
	}
	if diff := cmp.Diff([]string{"a"}, podNames(t, s, "n1")); diff != "" {
		t.Errorf("outer revert, n1 (-want +got):\n%s", diff)
	}

	// A top-level commit keeps the change for good.
	s.Fork()
	_ = s.AddPod(makePod("kept", "1").obj(), "n2")
	s.Commit()
	if s.Forked() {
		t.Error("still forked after the last commit")
	}
	if diff := cmp.Diff([]string{"kept"}, podNames(t, s, "n2")); diff != "" {
		t.Errorf("committed (-want +got):\n%s", diff)
	}
}

func TestSnapshotListerMatchesState(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("n1", "4").obj(), makeNode("n2", "4").obj()}, nil)
	s.Fork()
	_ = s.AddPod(makePod("anti", "1").antiAffinity("app", "x").obj(), "n2")
	anti, _ := s.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if len(anti) != 1 || anti[0].Node().Name != "n2" {
		t.Errorf("anti-affinity list = %v", anti)
	}
	s.Revert()
	anti, _ = s.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if len(anti) != 0 {
		t.Errorf("anti-affinity list after revert = %d nodes", len(anti))
	}
	if _, err := s.NodeInfos().Get("nope"); err == nil {
		t.Error("missing node found")
	}
}
