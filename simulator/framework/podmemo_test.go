package framework

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
)

func TestPodMemo(t *testing.T) {
	a, b := makePod("a", "1").Obj(), makePod("b", "1").Obj()
	calls := 0
	compute := func(p *apiv1.Pod) string { calls++; return p.Name }
	var m PodMemo[string]
	first, again := m.Get(a, compute), m.Get(a, compute) // the second from the memo
	if first != "a" || again != "a" || m.Get(b, compute) != "b" || calls != 2 {
		t.Fatalf("first loop: %d computations, want 2", calls)
	}
	m.Rotate()
	m.Get(a, compute) // b not asked for in this loop
	m.Rotate()
	if m.Get(a, compute); calls != 2 {
		t.Errorf("a computed again across loops (%d computations)", calls)
	}
	if m.Get(b, compute); calls != 3 {
		t.Errorf("b remembered after a loop without it (%d computations, want 3)", calls)
	}
	// A replaced object (an update) is another key.
	if m.Get(a.DeepCopy(), compute); calls != 4 {
		t.Errorf("a copy of a taken for a: %d computations, want 4", calls)
	}
}

// TestResetReusesPodInfos: a Reset with the same pod objects reuses their
// PodInfos; a replaced pod gets a new one; the node's requests are right.
func TestResetReusesPodInfos(t *testing.T) {
	n := makeNode("n", "4").Obj()
	p1, p2 := makePod("p1", "1").On("n").Obj(), makePod("p2", "1").On("n").Obj()
	s := NewSnapshot([]*apiv1.Node{n}, []*apiv1.Pod{p1, p2})
	before := podInfoOf(t, s, "n", "p1")
	p2b := makePod("p2", "2").On("n").Obj() // p2 changed: a new object
	s.Reset([]*apiv1.Node{n}, []*apiv1.Pod{p1, p2b})
	if podInfoOf(t, s, "n", "p1") != before {
		t.Error("p1's PodInfo built again")
	}
	ni, err := s.NodeInfo("n")
	if err != nil {
		t.Fatal(err)
	}
	if got := ni.Requested.MilliCPU; got != 3000 {
		t.Errorf("requested %dm after the Reset, want 3000m", got)
	}
}

func podInfoOf(t *testing.T, s *Snapshot, node, pod string) any {
	t.Helper()
	ni, err := s.NodeInfo(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, pi := range ni.Pods {
		if pi.GetPod().Name == pod {
			return pi
		}
	}
	t.Fatalf("pod %s not on %s", pod, node)
	return nil
}

// BenchmarkReset: one loop's snapshot of 3,000 nodes running 30 pods each,
// the informers' pod objects unchanged since the last loop.
//
//	go test -run xxx -bench 'BenchmarkReset$' -benchmem ./simulator/framework
func BenchmarkReset(b *testing.B) {
	var nodes []*apiv1.Node
	var pods []*apiv1.Pod
	for i := 0; i < 3000; i++ {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, makeNode(name, "16").Obj())
		for j := 0; j < 30; j++ {
			pods = append(pods, makePod(fmt.Sprintf("p%d-%d", i, j), "250m").On(name).Obj())
		}
	}
	s := NewSnapshot(nil, nil)
	s.Reset(nodes, pods)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Reset(nodes, pods)
	}
}

// BenchmarkFitAnywhere: a pod that only the last of 3,000 nodes takes, as
// the scale-down simulation asks for each pod of a candidate node.
//
//	go test -run xxx -bench FitAnywhere -benchmem ./simulator/framework
func BenchmarkFitAnywhere(b *testing.B) {
	var nodes []*apiv1.Node
	for i := 0; i < 3000; i++ {
		nodes = append(nodes, makeNode(fmt.Sprintf("n%d", i), "16").Obj())
	}
	nodes[len(nodes)-1].Labels["pool"] = "last"
	h := newHandle(b, NewSnapshot(nodes, nil))
	pod := makePod("p", "1").Selector("pool", "last").Obj()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if node, err := h.FitAnywhere(b.Context(), pod, nil); err != nil || node != "n2999" {
			b.Fatalf("placed on %q: %v", node, err)
		}
	}
}

// TestPodMemoRotateAllocatesNothing: once both maps exist, a loop's Rotate
// reuses the map it drops (cleared) instead of allocating one of every pod.
func TestPodMemoRotateAllocatesNothing(t *testing.T) {
	pods := make([]*apiv1.Pod, 1000)
	for i := range pods {
		pods[i] = makePod(fmt.Sprint("p", i), "1").Obj()
	}
	compute := func(p *apiv1.Pod) int { return len(p.Name) }
	var m PodMemo[int]
	loop := func() {
		for _, p := range pods {
			m.Get(p, compute)
		}
		m.Rotate()
	}
	loop()
	loop()
	if n := testing.AllocsPerRun(5, loop); n != 0 {
		t.Errorf("a loop of 1,000 remembered pods allocated %v times, want 0", n)
	}
	if v := m.Get(pods[0], func(*apiv1.Pod) int { return -1 }); v != 2 {
		t.Errorf("after the loops pods[0] = %d, want its remembered 2", v)
	}
}

func TestPodsByNode(t *testing.T) {
	a1, b1, a2, pending, a3 := makePod("a1", "1").On("a").Obj(), makePod("b1", "1").On("b").Obj(),
		makePod("a2", "1").On("a").Obj(), makePod("pending", "1").Obj(), makePod("a3", "1").On("a").Obj()
	got := PodsByNode([]*apiv1.Pod{a1, b1, a2, pending, a3})
	names := map[string][]string{}
	for node, pods := range got {
		for _, p := range pods {
			names[node] = append(names[node], p.Name)
		}
	}
	if diff := cmp.Diff(map[string][]string{"a": {"a1", "a2", "a3"}, "b": {"b1"}}, names); diff != "" {
		t.Errorf("PodsByNode (-want +got):\n%s", diff)
	}
	// An append to one node's pods leaves the others' as they are.
	_ = append(got["a"], pending)
	_ = append(got["b"], pending)
	if got["b"][0] != b1 || got["a"][2] != a3 || len(got["a"]) != 3 {
		t.Error("an append to one node's pods wrote into another's")
	}
	if n := len(PodsByNode(nil)); n != 0 {
		t.Errorf("PodsByNode(nil) has %d nodes", n)
	}
}
