package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sibling returns a pod of base's workload as the informers' cache holds
// it: its own name, UID and node, the other parts shared with base.
func sibling(base *apiv1.Pod, name string) *apiv1.Pod {
	p := *base
	p.Name, p.UID, p.ResourceVersion = name, types.UID("uid-"+name), "42"
	return &p
}

func ptrTo[T any](v T) *T { return &v }

func tokenVolume(name string) apiv1.Volume {
	return apiv1.Volume{Name: name, VolumeSource: apiv1.VolumeSource{Projected: &apiv1.ProjectedVolumeSource{}}}
}

// TestInterchangeable: pods that differ only in what names them (and in
// node-local volumes) share a check; a pod holding any other part apart
// (even an equal copy of it), or differing in any other field, does not.
func TestInterchangeable(t *testing.T) {
	base := makePod("web-0", "1").Label("app", "web").Tolerate("t").Obj()
	base.Spec.Volumes = []apiv1.Volume{tokenVolume("kube-api-access-aaaaa")}
	base.Spec.TerminationGracePeriodSeconds = ptrTo(int64(30))
	cases := []struct {
		name string
		edit func(p *apiv1.Pod)
		want bool
	}{
		{"name, UID, resource version", func(p *apiv1.Pod) {}, true},
		{"its own node-local token volume", func(p *apiv1.Pod) {
			p.Spec.Volumes = []apiv1.Volume{tokenVolume("kube-api-access-bbbbb")}
		}, true},
		{"labels equal but held apart", func(p *apiv1.Pod) { p.Labels = map[string]string{"app": "web"} }, false},
		{"other labels", func(p *apiv1.Pod) { p.Labels = map[string]string{"app": "db"} }, false},
		{"other namespace", func(p *apiv1.Pod) { p.Namespace = "other" }, false},
		{"annotations", func(p *apiv1.Pod) { p.Annotations = map[string]string{"a": "b"} }, false},
		{"tolerations held apart", func(p *apiv1.Pod) {
			p.Spec.Tolerations = append([]apiv1.Toleration(nil), p.Spec.Tolerations...)
		}, false},
		{"containers held apart", func(p *apiv1.Pod) {
			p.Spec.Containers = append([]apiv1.Container(nil), p.Spec.Containers...)
		}, false},
		{"node selector", func(p *apiv1.Pod) { p.Spec.NodeSelector = map[string]string{"k": "v"} }, false},
		{"node name", func(p *apiv1.Pod) { p.Spec.NodeName = "n1" }, false},
		{"hostname", func(p *apiv1.Pod) { p.Spec.Hostname = "web-1" }, false},
		{"priority class", func(p *apiv1.Pod) { p.Spec.PriorityClassName = "high" }, false},
		{"a claim volume", func(p *apiv1.Pod) {
			p.Spec.Volumes = []apiv1.Volume{{Name: "data", VolumeSource: apiv1.VolumeSource{
				PersistentVolumeClaim: &apiv1.PersistentVolumeClaimVolumeSource{ClaimName: "data-1"}}}}
		}, false},
		{"being deleted", func(p *apiv1.Pod) { p.DeletionGracePeriodSeconds = new(int64) }, false},
		{"its own grace period, the same", func(p *apiv1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptrTo(int64(30)) }, true},
		{"another grace period", func(p *apiv1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptrTo(int64(5)) }, false},
		{"a grace period where the other has none", func(p *apiv1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(5)) }, false},
	}
	for _, tc := range cases {
		p := sibling(base, "web-1")
		tc.edit(p)
		if got := interchangeable(base, p); got != tc.want {
			t.Errorf("%s: interchangeable = %v, want %v", tc.name, got, tc.want)
		}
		if got := interchangeable(p, base); got != tc.want {
			t.Errorf("%s (swapped): interchangeable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCheckMemoLendsToTheSameWorkloadOnly: a pod of the workload of a pod
// prepared before gets that pod's PreFilter state, runs Filter as itself
// and is named in the refusals, even after the first pod was bound to a
// node (the memo prepared a copy of its own); a pod of another workload and a pod with
// inter-pod terms are prepared anew.
func TestCheckMemoLendsToTheSameWorkloadOnly(t *testing.T) {
	s := NewSnapshot([]*apiv1.Node{makeNode("n1", "2").Obj()}, nil)
	h := newHandle(t, s)
	ctx := context.Background()
	m := h.NewCheckMemo()
	first := makePod("web-0", "1").Label("app", "web").Obj()
	c0 := m.Prepare(ctx, first)
	second := sibling(first, "web-1")
	first.Spec.NodeName = "n1" // bound where it fits, as a drain simulation does
	c1 := m.Prepare(ctx, second)
	if c1.state != c0.state || c1.pod.Name != "web-1" {
		t.Errorf("a sibling got state %p (first's %p) and pod %s; want first's state, itself", c1.state, c0.state, c1.pod.Name)
	}
	if c := m.Prepare(ctx, makePod("db-0", "1").Label("app", "web").Obj()); c.state == c0.state {
		t.Error("a pod of another workload got the first pod's state")
	}
	anti := antiAffinityPod("db-0").Obj()
	a0 := m.Prepare(ctx, anti)
	if a1 := m.Prepare(ctx, sibling(anti, "db-1")); a1.state == a0.state {
		t.Error("a pod with inter-pod terms got the state of its sibling")
	}
	big := makePod("big-0", "3").Obj()
	m.Prepare(ctx, big)
	next := 0
	_, err := m.Prepare(ctx, sibling(big, "big-1")).FitFrom(ctx, nil, &next)
	var u *Unschedulable
	if !errors.As(err, &u) || u.Pod.Name != "big-1" || !strings.Contains(err.Error(), "big-1") {
		t.Errorf("refusal of a sibling = %v; want one naming big-1", err)
	}
}

// TestCheckMemoForgetsWhenInterPodTermsChange: a pod-local pod's PreFilter
// result (the InterPodAffinity plugin's count of the existing pods whose
// anti-affinity it matches) is not lent once a pod with such terms was
// placed or its node removed, nor after a Reset: the next sibling is refused
// by the node the new pod repels it from, and welcome there again once that
// node is gone and back without it.
func TestCheckMemoForgetsWhenInterPodTermsChange(t *testing.T) {
	nodes := []*apiv1.Node{makeNode("a", "4").Obj(), makeNode("b", "4").Obj()}
	s := NewSnapshot(nodes, nil)
	h := newHandle(t, s)
	ctx := context.Background()
	m := h.NewCheckMemo()
	web := makePod("web-0", "100m").Label("app", "web").Obj()
	onlyA := func(n string) bool { return n == "a" }
	fitOn := func(step string, p *apiv1.Pod, accept func(string) bool, want string) {
		t.Helper()
		next := 0
		got, err := m.Prepare(ctx, p).FitFrom(ctx, accept, &next)
		if want == "" {
			if err == nil {
				t.Errorf("%s: %s fits %q; want no node", step, p.Name, got)
			}
			return
		}
		if err != nil || got != want {
			t.Errorf("%s: %s fits %q, %v; want %q", step, p.Name, got, err, want)
		}
	}
	fit := func(step string, p *apiv1.Pod, want string) { t.Helper(); fitOn(step, p, nil, want) }
	fit("start", web, "a")
	s.Fork()
	guard := makePod("guard", "100m").AntiAffinity("app", "web").Obj()
	if err := s.AddPod(guard, "a"); err != nil {
		t.Fatal(err)
	}
	fit("guard placed on a", sibling(web, "web-1"), "b")
	fitOn("guard placed on a, only a considered", sibling(web, "web-1b"), onlyA, "")
	if err := s.RemoveNode("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddNode(makeNode("a", "4").Obj()); err != nil {
		t.Fatal(err)
	}
	fitOn("a removed and added back without the guard", sibling(web, "web-2"), onlyA, "a")
	s.Revert()
	fit("reverted: guard gone", sibling(web, "web-3"), "a")
	s.Reset(nodes, []*apiv1.Pod{makePod("guard", "100m").AntiAffinity("app", "web").On("a").Obj()})
	fit("reset with the guard on a", sibling(web, "web-4"), "b")
}

// TestCheckMemoKeepsManyWorkloadsOfOneShape: the informers' cache shares
// one containers array among all the workloads whose pods ask the same;
// each of 20 such workloads (labels of their own) still gets its pods'
// result lent. (Keyed by the containers alone, the memo held the first 8
// and prepared every pod of the others anew.)
func TestCheckMemoKeepsManyWorkloadsOfOneShape(t *testing.T) {
	h := newHandle(t, NewSnapshot([]*apiv1.Node{makeNode("n1", "2").Obj()}, nil))
	ctx := context.Background()
	m := h.NewCheckMemo()
	shape := makePod("shape", "100m").Obj().Spec.Containers
	var firsts []*apiv1.Pod
	var states []any
	for i := range 20 {
		p := makePod(fmt.Sprintf("w%d-0", i), "100m").Label("app", fmt.Sprintf("w%d", i)).Obj()
		p.Spec.Containers = shape
		firsts = append(firsts, p)
		states = append(states, m.Prepare(ctx, p).state)
	}
	for i, p := range firsts {
		if got := m.Prepare(ctx, sibling(p, p.Name+"-b")).state; got != states[i] {
			t.Errorf("workload %d: its second pod was prepared anew", i)
		}
	}
}
