package framework

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
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
		[]*apiv1.Node{makeNode("n1", "4").Obj(), makeNode("n2", "4").Obj()},
		[]*apiv1.Pod{makePod("a", "1").On("n1").Obj(), makePod("stray", "1").On("gone").Obj()},
	)
	before, _ := s.NodeInfo("n1")

	s.Fork()
	if err := s.AddPod(makePod("b", "1").Obj(), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddNode(makeNode("n3", "8").Obj()); err != nil {
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
	_ = s.AddPod(makePod("outer", "1").Obj(), "n2")
	s.Fork()
	_ = s.AddPod(makePod("inner", "1").Obj(), "n2")
	_ = s.AddPod(makePod("inner2", "1").Obj(), "n1")
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
	_ = s.AddPod(makePod("kept", "1").Obj(), "n2")
	s.Commit()
	if s.Forked() {
		t.Error("still forked after the last commit")
	}
	if diff := cmp.Diff([]string{"kept"}, podNames(t, s, "n2")); diff != "" {
		t.Errorf("committed (-want +got):\n%s", diff)
	}
}

func TestSnapshotListerMatchesState(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("n1", "4").Obj(), makeNode("n2", "4").Obj()}, nil)
	s.Fork()
	_ = s.AddPod(makePod("anti", "1").AntiAffinity("app", "x").Obj(), "n2")
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

func TestSnapshotCopyNode(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("n1", "4").Obj()},
		[]*apiv1.Pod{makePod("a", "1").On("n1").Obj(), makePod("anti", "1").On("n1").AntiAffinity("app", "x").Obj()})
	s.Fork()
	if err := s.CopyNode("n1", makeNode("twin", "4").Obj()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "anti"}, podNames(t, s, "twin")); diff != "" {
		t.Errorf("twin pods (-want +got):\n%s", diff)
	}
	pods, _ := s.Pods("twin")
	for _, p := range pods {
		if p.Spec.NodeName != "twin" {
			t.Errorf("pod %s bound to %q on the twin", p.Name, p.Spec.NodeName)
		}
	}
	if cpu, _, n, _ := s.Free("twin"); cpu != 2000 || n != 108 {
		t.Errorf("twin free cpu %d, pod slots %d; want 2000, 108", cpu, n)
	}
	anti, _ := s.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if len(anti) != 2 {
		t.Errorf("%d nodes with anti-affinity pods, want 2", len(anti))
	}
	// The twin is independent of its source.
	if err := s.AddPod(makePod("b", "1").Obj(), "twin"); err != nil {
		t.Fatal(err)
	}
	if got := podNames(t, s, "n1"); len(got) != 2 {
		t.Errorf("source pods after adding to the twin: %v", got)
	}
	if err := s.CopyNode("gone", makeNode("x", "4").Obj()); err == nil {
		t.Error("copied a node the snapshot does not hold")
	}
	if err := s.CopyNode("n1", makeNode("twin", "4").Obj()); err == nil {
		t.Error("copied onto an existing name")
	}
	s.Revert()
	if diff := cmp.Diff([]string{"n1"}, s.NodeNames()); diff != "" {
		t.Errorf("after revert (-want +got):\n%s", diff)
	}
}

func TestSnapshotAddPodsShaped(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("n1", "4").Obj()}, nil)
	shape, err := NewPodShape(makePod("rep", "1").Obj())
	if err != nil {
		t.Fatal(err)
	}
	s.Fork()
	if err := s.AddPodsShaped(shape, []*apiv1.Pod{makePod("a", "1").Obj(), makePod("b", "1").Obj()}, "n1"); err != nil {
		t.Fatal(err)
	}
	if cpu, _, _, _ := s.Free("n1"); cpu != 2000 {
		t.Errorf("free cpu %d after two 1-cpu pods, want 2000", cpu)
	}
	s.Revert()
	if cpu, _, _, _ := s.Free("n1"); cpu != 4000 {
		t.Errorf("free cpu %d after revert, want 4000", cpu)
	}
}

// TestAddPodLikeIsAddPod: a pod moved with AddPodLike (a copy of a pod of
// the last Reset, without its node name) leaves the destination's NodeInfo
// as AddPod does: requests, non-zero requests, ports, affinity lists, the
// pod bound to the node; and it uses the PodInfo the snapshot keeps for the
// original (whose cached requests it shares) instead of a new analysis.
func TestAddPodLikeIsAddPod(t *testing.T) {
	orig := makePod("p", "1").On("n1").HostPort(8080).AntiAffinity("app", "x").Obj()
	nodes := func() []*apiv1.Node { return []*apiv1.Node{makeNode("n1", "4").Obj(), makeNode("n2", "4").Obj()} }
	moved := func() *apiv1.Pod {
		cp := *orig
		cp.Spec.NodeName = ""
		return &cp
	}
	want := NewSnapshot(nodes(), []*apiv1.Pod{orig})
	if err := want.AddPod(moved(), "n2"); err != nil {
		t.Fatal(err)
	}
	got := NewSnapshot(nodes(), []*apiv1.Pod{orig})
	if err := got.AddPodLike(moved(), orig, "n2"); err != nil {
		t.Fatal(err)
	}
	view := func(s *Snapshot) any {
		ni, err := s.NodeInfo("n2")
		if err != nil {
			t.Fatal(err)
		}
		var pods []string
		for _, pi := range ni.Pods {
			pods = append(pods, pi.GetPod().Name+"@"+pi.GetPod().Spec.NodeName)
		}
		return []any{ni.Requested, ni.NonZeroRequested, ni.UsedPorts, len(ni.PodsWithAffinity),
			len(ni.PodsWithRequiredAntiAffinity), pods}
	}
	if diff := cmp.Diff(view(want), view(got)); diff != "" {
		t.Errorf("AddPodLike differs from AddPod (-AddPod +AddPodLike):\n%s", diff)
	}
	kept, err := got.NodeInfo("n1")
	if err != nil {
		t.Fatal(err)
	}
	ni, _ := got.NodeInfo("n2")
	a, b := kept.Pods[0].(*schedframework.PodInfo), ni.Pods[0].(*schedframework.PodInfo)
	if len(b.RequiredAntiAffinityTerms) != 1 || &a.RequiredAntiAffinityTerms[0] != &b.RequiredAntiAffinityTerms[0] {
		t.Error("the moved pod's affinity terms were analysed again, not shared with the original's PodInfo")
	}
	if a.CalculateResource().Resource != b.CalculateResource().Resource {
		t.Error("the moved pod's requests were computed again, not shared with the original's PodInfo")
	}
}

// TestHasRoomNeverRefusesWhatTheSchedulerAccepts: HasRoom is a shortcut for
// the Filter plugins, so it may only refuse pods they refuse too. On a node
// whose bound pods request more CPU than it has (bound before its
// allocatable shrank, or static pods), the scheduler still accepts a pod
// that requests no CPU; HasRoom refused it, so pending pods without
// requests looked unplaceable on such nodes and asked for a scale-up.
func TestHasRoomNeverRefusesWhatTheSchedulerAccepts(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("over", "4").Obj(), makeNode("full", "4").Obj()},
		[]*apiv1.Pod{makePod("a", "3").On("over").Obj(), makePod("b", "3").On("over").Obj(),
			makePod("c", "4").On("full").Obj()})
	h := newHandle(t, s)
	ctx := context.Background()
	for _, tc := range []struct {
		pod  *apiv1.Pod
		node string
		want bool // the scheduler's answer, checked below
	}{
		{makePod("no-requests", "0").Obj(), "over", true},
		{makePod("no-requests", "0").Obj(), "full", true},
		{makePod("one-cpu", "1").Obj(), "over", false},
		{makePod("one-cpu", "1").Obj(), "full", false},
		{makePod("milli", "1m").Obj(), "full", false},
	} {
		fits := h.Prepare(ctx, tc.pod).Fits(ctx, tc.node) == nil
		if fits != tc.want {
			t.Fatalf("the scheduler says %s fits %s: %v; the case expects %v", tc.pod.Name, tc.node, fits, tc.want)
		}
		if room := s.HasRoom(tc.node, RequestOf(tc.pod)); room != fits {
			t.Errorf("HasRoom(%s, %s) = %v, the scheduler's Filter says %v", tc.node, tc.pod.Name, room, fits)
		}
	}
}
