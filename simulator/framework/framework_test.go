package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func newHandle(t testing.TB, s *Snapshot) *Handle {
	t.Helper()
	ctx := t.Context()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	h, err := New(ctx, s, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return h
}

// TestFilterPlugins asks the real default plugins about cases each of them owns.
func TestFilterPlugins(t *testing.T) {
	nodes := []*apiv1.Node{
		makeNode("small", "2").Label("pool", "a").Obj(),
		makeNode("tainted", "8").Taint("dedicated").Obj(),
	}
	pods := []*apiv1.Pod{
		makePod("web-1", "1").On("small").Label("app", "web").HostPort(8080).Obj(),
	}
	h := newHandle(t, NewSnapshot(nodes, pods))
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		pod    *apiv1.Pod
		node   string
		reason string // empty: fits
	}{
		{name: "fits", pod: makePod("p", "1").Obj(), node: "small"},
		{name: "too big", pod: makePod("p", "2").Obj(), node: "small", reason: "Insufficient cpu"},
		{name: "selector", pod: makePod("p", "1").Selector("pool", "b").Obj(), node: "small", reason: "didn't match Pod's node affinity/selector"},
		{name: "taint", pod: makePod("p", "1").Obj(), node: "tainted", reason: "untolerated taint"},
		{name: "toleration", pod: makePod("p", "1").Tolerate("dedicated").Obj(), node: "tainted"},
		{name: "host port", pod: makePod("p", "100m").HostPort(8080).Obj(), node: "small", reason: "free ports"},
		{name: "anti-affinity", pod: makePod("p", "100m").AntiAffinity("app", "web").Obj(), node: "small", reason: "anti-affinity"},
		{name: "anti-affinity elsewhere", pod: makePod("p", "100m").AntiAffinity("app", "web").Tolerate("dedicated").Obj(), node: "tainted"},
	} {
		err := h.CheckPod(ctx, tc.pod, tc.node)
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)):
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.reason)
		}
		var u *Unschedulable
		if err != nil && !errors.As(err, &u) {
			t.Errorf("%s: %T is not *Unschedulable", tc.name, err)
		}
	}
}

// TestSimulatedPlacementUsesTheSnapshot: pods placed in a fork take room;
// reverting gives it back.
func TestSimulatedPlacementUsesTheSnapshot(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("n1", "4").Obj(), makeNode("n2", "4").Obj()}, nil)
	h := newHandle(t, s)
	ctx := context.Background()
	s.Fork()
	placed := map[string]int{}
	for i := 0; i < 8; i++ {
		p := makePod("p"+string(rune('a'+i)), "1").Obj()
		node, err := h.FitAnywhere(ctx, p, nil)
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if err := s.AddPod(p, node); err != nil {
			t.Fatal(err)
		}
		placed[node]++
	}
	if placed["n1"] != 4 || placed["n2"] != 4 {
		t.Errorf("placement = %v, want 4 and 4", placed)
	}
	if _, err := h.FitAnywhere(ctx, makePod("ninth", "1").Obj(), nil); err == nil {
		t.Error("a ninth 1-CPU pod fits two 4-CPU nodes")
	}
	s.Revert()
	if _, err := h.FitAnywhere(ctx, makePod("after", "4").Obj(), nil); err != nil {
		t.Errorf("after revert a 4-CPU pod does not fit: %v", err)
	}
	// A template node added in a fork hosts pods like a real one.
	s.Fork()
	if err := s.AddNode(makeNode("template-1", "16").Obj()); err != nil {
		t.Fatal(err)
	}
	node, err := h.FitAnywhere(ctx, makePod("big", "10").Obj(), nil)
	if err != nil || node != "template-1" {
		t.Errorf("big pod placed on %q, %v; want template-1", node, err)
	}
	s.Revert()
}

func TestPodsWithMissingClaimsAreNotPretendedToFit(t *testing.T) {
	h := newHandle(t, NewSnapshot([]*apiv1.Node{makeNode("n1", "4").Obj()}, nil))
	p := makePod("dra", "1").Obj()
	name := "gpu"
	p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}}
	if err := h.CheckPod(context.Background(), p, "n1"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("pod with a claim the cluster does not have: %v", err)
	}
}

func TestSchedulerConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	// A profile without the TaintToleration filter: tainted nodes accept every pod.
	cfg := `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: TaintToleration
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewSnapshot([]*apiv1.Node{makeNode("tainted", "4").Taint("dedicated").Obj()}, nil)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	h, err := New(t.Context(), s, factory, WithSchedulerConfigFile(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CheckPod(context.Background(), makePod("p", "1").Obj(), "tainted"); err != nil {
		t.Errorf("with TaintToleration disabled the pod should fit: %v", err)
	}
	if _, err := New(t.Context(), s, factory, WithSchedulerConfigFile(filepath.Join(t.TempDir(), "missing.yaml"))); err == nil {
		t.Error("a missing config file was accepted")
	}
	// Found by FuzzSchedulerConfigFile: files that kube-scheduler's
	// validation refuses (as upstream's autoscaler does) were accepted.
	for _, bad := range []string{
		"percentageOfNodesToScore: 300\nparallelism: -1\n",
		"profiles:\n- schedulerName: x\n- schedulerName: x\n",
	} {
		if err := os.WriteFile(path, []byte(cfg[:strings.Index(cfg, "profiles:")]+bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := New(t.Context(), s, factory, WithSchedulerConfigFile(path)); err == nil ||
			!strings.Contains(err.Error(), "--scheduler-config-file") {
			t.Errorf("%q: error %v, want the scheduler's validation error", bad, err)
		}
	}
}

func TestFitCount(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("n1", "4").Obj(), makeNode("tainted", "4").Taint("dedicated").Obj()},
		[]*apiv1.Pod{makePod("used", "1").On("n1").Obj()})
	h := newHandle(t, s)
	ctx := context.Background()
	var pods []*apiv1.Pod
	for i := range 5 {
		pods = append(pods, makePod("p"+string(rune('a'+i)), "1").Obj())
	}
	shape, err := NewPodShape(pods[0])
	if err != nil {
		t.Fatal(err)
	}
	check := h.Prepare(ctx, pods[0])
	n, reason := check.FitCount(ctx, shape, pods, "n1", nil)
	if n != 3 || reason == nil || !strings.Contains(reason.Error(), "Insufficient cpu") {
		t.Errorf("FitCount = %d, %v; want 3 and insufficient cpu", n, reason)
	}
	req := RequestOf(pods[0])
	if n, reason := check.FitCount(ctx, shape, pods, "n1", &req); n != 3 || reason == nil {
		t.Errorf("FitCount with the room check = %d, %v; want 3 and a reason", n, reason)
	}
	if n, reason := check.FitCount(ctx, shape, pods[:2], "n1", nil); n != 2 || reason != nil {
		t.Errorf("FitCount of two = %d, %v; want 2, nil", n, reason)
	}
	if n, reason := check.FitCount(ctx, shape, pods, "tainted", nil); n != 0 || reason == nil ||
		!strings.Contains(reason.Error(), "untolerated taint") {
		t.Errorf("FitCount on the tainted node = %d, %v", n, reason)
	}
	if cpu, _, _, _ := s.Free("n1"); cpu != 3000 {
		t.Errorf("FitCount changed the snapshot: free cpu %d, want 3000", cpu)
	}
}

// TestFitFrom: the search starts at the hint, wraps around, and leaves the
// hint at the node that took the pod, so that pods filling nodes one after
// the other ask about each node a bounded number of times (here n nodes of
// 1 CPU and n pods of 1 CPU: 2n-1 nodes looked at, not n(n+1)/2); an
// out-of-range hint is valid; a pod that fits nowhere says why.
func TestFitFrom(t *testing.T) {
	const n = 50
	var nodes []*apiv1.Node
	for i := range n {
		nodes = append(nodes, makeNode(fmt.Sprintf("n%02d", i), "1").Obj())
	}
	s := NewSnapshot(nodes, nil)
	h := newHandle(t, s)
	ctx := context.Background()
	asked, next := 0, 0
	count := func(string) bool { asked++; return true }
	for i := range n {
		p := makePod(fmt.Sprintf("p%02d", i), "1").Obj()
		node, err := h.FitFrom(ctx, p, count, &next)
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if want := fmt.Sprintf("n%02d", i); node != want || next != i {
			t.Fatalf("pod %d went to %s (next %d), want %s (%d)", i, node, next, want, i)
		}
		if err := s.AddPod(p, node); err != nil {
			t.Fatal(err)
		}
	}
	if asked != 2*n-1 {
		t.Errorf("nodes looked at = %d, want %d", asked, 2*n-1)
	}
	// Room on n03 only: from hint 40 the search wraps around to it.
	if err := s.RemovePod(mustPods(t, s, "n03")[0], "n03"); err != nil {
		t.Fatal(err)
	}
	next = 40 + 3*n
	if node, err := h.FitFrom(ctx, makePod("again", "1").Obj(), nil, &next); node != "n03" || err != nil || next != 3 {
		t.Errorf("FitFrom from 40 = %q, %v (next %d); want n03 (3)", node, err, next)
	}
	if _, err := h.FitFrom(ctx, makePod("big", "2").Obj(), nil, &next); err == nil ||
		!strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("a pod that fits nowhere: %v", err)
	}
}

func mustPods(t *testing.T, s *Snapshot, node string) []*apiv1.Pod {
	t.Helper()
	pods, err := s.Pods(node)
	if err != nil || len(pods) == 0 {
		t.Fatalf("pods of %s: %v, %v", node, pods, err)
	}
	return pods
}

// TestFitFromWalkNamesTheNodesItRead: the walk holds every node whose Filter
// plugins ran, from the hint to the node that took the pod, and none that
// accept turned away.
func TestFitFromWalkNamesTheNodesItRead(t *testing.T) {
	var nodes []*apiv1.Node
	for i := range 6 {
		nodes = append(nodes, makeNode(fmt.Sprintf("n%d", i), "1").Obj())
	}
	s := NewSnapshot(nodes, []*apiv1.Pod{makePod("a", "1").On("n3").Obj(), makePod("b", "1").On("n5").Obj()})
	h := newHandle(t, s)
	ctx := context.Background()
	next := 3
	var w Walk
	node, err := h.Prepare(ctx, makePod("p", "1").Obj()).FitFromWalk(ctx, func(n string) bool { return n != "n4" }, &next, &w)
	if err != nil || node != "n0" || next != 0 {
		t.Fatalf("FitFromWalk = %q, %v (next %d); want n0 (0)", node, err, next)
	}
	if want := []string{"n3", "n5", "n0"}; !slices.Equal(w.Read, want) || !slices.Equal(w.Dest, []string{"n0"}) {
		t.Errorf("walk read %v, placed on %v; want %v (n4 turned away, not read), placed on n0", w.Read, w.Dest, want)
	}
}

// TestResetStampsUnchangedNodes: UnchangedSince holds for a node whose Node
// object and pods every Reset since kept, and not for one given a new pod
// or a new Node object, nor for a node added; the layout follows the names
// and their order, not the objects.
func TestResetStampsUnchangedNodes(t *testing.T) {
	a, b := makeNode("a", "4").Obj(), makeNode("b", "4").Obj()
	pa := makePod("pa", "1").On("a").Obj()
	s := NewSnapshot([]*apiv1.Node{a, b}, []*apiv1.Pod{pa})
	first, layout := s.ResetCount(), s.ResetLayout()
	s.Reset([]*apiv1.Node{a, b}, []*apiv1.Pod{pa})
	if !s.UnchangedSince("a", first) || !s.UnchangedSince("b", first) || s.ResetLayout() != layout {
		t.Fatal("a quiet Reset changed a node or the layout")
	}
	b2 := b.DeepCopy()
	c := makeNode("c", "4").Obj()
	s.Reset([]*apiv1.Node{a, b2, c}, []*apiv1.Pod{pa, makePod("pa2", "1").On("a").Obj()})
	for _, n := range []string{"a", "b", "c"} {
		if s.UnchangedSince(n, first) {
			t.Errorf("%s taken as unchanged after a new pod, a new Node object, or being added", n)
		}
	}
	second := s.ResetCount()
	s.Reset([]*apiv1.Node{a, b2, c}, []*apiv1.Pod{pa})
	if !s.UnchangedSince("b", second) || !s.UnchangedSince("c", second) || s.UnchangedSince("a", second) {
		t.Error("after a Reset that only took a's new pod away, b and c are unchanged and a is not")
	}
	if s.ResetLayout() == layout {
		t.Error("a node added: the layout must differ")
	}
	s.Reset([]*apiv1.Node{a.DeepCopy(), b2.DeepCopy()}, nil)
	if s.ResetLayout() != layout {
		t.Error("the same names in the same order (new objects): the layout must be the same")
	}
	s.Reset([]*apiv1.Node{b2, a}, nil)
	if s.ResetLayout() == layout {
		t.Error("the same names in another order: the layout must differ")
	}
}
