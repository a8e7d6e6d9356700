package main

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// sibling is another pod of base's workload: other name, UID, node and IP,
// decoded separately (no part in common with base).
func sibling(base *apiv1.Pod, name, node string) *apiv1.Pod {
	p := base.DeepCopy()
	p.Name, p.UID, p.Spec.NodeName = name, types.UID(name+"-uid"), node
	p.Status.PodIP = "10.0.0." + name[len(name)-1:]
	return p
}

func sameBacking[T any](a, b []T) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

func sameMap(a, b map[string]string) bool {
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestPodSharerSharesAWorkloadsParts: two pods of one workload end up with
// the same containers, labels, annotations, owners, tolerations, spread
// constraints and security context (one copy), each still equal to what it
// was; a pod of another shape keeps its own.
func TestPodSharerSharesAWorkloadsParts(t *testing.T) {
	base := loadPod(t, "pod-deployment-typical.yaml")
	a, b := sibling(base, "p1", "n1"), sibling(base, "p2", "n2")
	other := sibling(base, "p3", "n3")
	other.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = resource.MustParse("2")
	trim := newCacheTrimmer()
	var want []*apiv1.Pod
	for _, p := range []*apiv1.Pod{a, b, other} {
		w := p.DeepCopy()
		trimPod(w)
		w.ManagedFields = nil
		want = append(want, w)
		if _, err := trim.transform(p); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []*apiv1.Pod{a, b, other} {
		if diff := cmp.Diff(want[i], p); diff != "" {
			t.Errorf("pod %s changed by sharing (-want +got):\n%s", p.Name, diff)
		}
	}
	checks := map[string]bool{
		"containers":      sameBacking(a.Spec.Containers, b.Spec.Containers),
		"init containers": sameBacking(a.Spec.InitContainers, b.Spec.InitContainers),
		"labels":          sameMap(a.Labels, b.Labels),
		"annotations":     sameMap(a.Annotations, b.Annotations),
		"owners":          sameBacking(a.OwnerReferences, b.OwnerReferences),
		"tolerations":     sameBacking(a.Spec.Tolerations, b.Spec.Tolerations),
		"spread":          sameBacking(a.Spec.TopologySpreadConstraints, b.Spec.TopologySpreadConstraints),
		"security":        a.Spec.SecurityContext == b.Spec.SecurityContext,
	}
	for part, shared := range checks {
		if !shared {
			t.Errorf("%s not shared by two pods of one workload", part)
		}
	}
	if sameBacking(a.Spec.Containers, other.Spec.Containers) {
		t.Error("containers of another shape shared")
	}
	if !sameBacking(a.Spec.InitContainers, other.Spec.InitContainers) || !sameMap(a.Labels, other.Labels) {
		t.Error("the equal parts of a pod of another shape not shared")
	}
	// A copy owns its parts: changing it leaves the cached pods alone.
	c := a.DeepCopy()
	c.Labels["changed"] = "yes"
	c.Spec.Containers[0].Image = "changed"
	if _, ok := b.Labels["changed"]; ok || b.Spec.Containers[0].Image == "changed" {
		t.Error("a deep copy still shares parts with the cache")
	}
}

// TestPodSharerStartsAnewWhenFull: past its limit the sharer forgets what it
// held (checked before each pod, so it may hold a pod's parts more); pods
// stay correct and share again from there.
func TestPodSharerStartsAnewWhenFull(t *testing.T) {
	base := loadPod(t, "pod-bound-minimal.yaml")
	s := newPodSharer(8)
	var pods []*apiv1.Pod
	// Five parts each (containers, labels, owners, tolerations, security
	// context); a new label value each up to p5, which p6 shares.
	for i, label := range []string{"1", "2", "3", "4", "5", "5"} {
		p := sibling(base, "p"+string(rune('1'+i)), "n")
		p.Labels = map[string]string{"app": "wl-0000", "v": label}
		s.share(p)
		pods = append(pods, p)
		if s.entries > 8+5 {
			t.Fatalf("after %s: %d entries held, limit 8", p.Name, s.entries)
		}
	}
	for _, p := range pods {
		if diff := cmp.Diff(base.Spec.Containers, p.Spec.Containers); diff != "" {
			t.Errorf("pod %s containers (-want +got):\n%s", p.Name, diff)
		}
	}
	if !sameBacking(pods[0].Spec.Containers, pods[3].Spec.Containers) {
		t.Error("no sharing before the limit")
	}
	if sameBacking(pods[0].Spec.Containers, pods[4].Spec.Containers) {
		t.Error("sharing across the reset: the tables were not emptied")
	}
	if !sameBacking(pods[4].Spec.Containers, pods[5].Spec.Containers) || !sameMap(pods[4].Labels, pods[5].Labels) {
		t.Error("no sharing after the reset")
	}
}
