package framework

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// allocatedClaim is a claim as the cluster has it once kube-scheduler
// placed its consumers on node: allocated there (device gpu-0 of the node's
// pool), reserved for the pods; owner, when set, is the pod the claim was
// made for from a template.
func allocatedClaim(name, node string, owner *apiv1.Pod, consumers ...*apiv1.Pod) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: gpuRequests(1)}}
	if owner != nil {
		yes := true
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID, Controller: &yes}}
	}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: testDriver, Pool: node, Device: "gpu-0"}}},
		NodeSelector: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{MatchFields: []apiv1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: apiv1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	for _, p := range consumers {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// ownClaimPod is a pod of the cluster whose template claim "gpu" is claim.
func ownClaimPod(name, node, claim string) *apiv1.Pod {
	p := templatePod(name)
	p.Spec.NodeName = node
	p.Status.ResourceClaimStatuses = []apiv1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
	return p
}

func sharedClaimPod(name, node, claim string) *apiv1.Pod {
	p := makePod(name, "1").On(node).Obj()
	p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	return p
}

// claimState summarises a claim: the pool it is allocated in ("" when not
// allocated) and the pods reserving it.
func claimState(t *testing.T, s *Snapshot, name string) []string {
	t.Helper()
	c, ok := s.Claim("default", name)
	if !ok {
		t.Fatalf("claim %s not in the snapshot", name)
	}
	pool := ""
	if c.Status.Allocation != nil {
		pool = c.Status.Allocation.Devices.Results[0].Pool
	}
	out := []string{"pool=" + pool}
	for _, r := range c.Status.ReservedFor {
		out = append(out, r.Name)
	}
	return out
}

func TestDRARemovePodReleasesClaims(t *testing.T) {
	own := ownClaimPod("own", "gpu-1", "own-gpu-x")
	a, b := sharedClaimPod("a", "gpu-1", "shared"), sharedClaimPod("b", "gpu-1", "shared")
	tests := []struct {
		name   string
		claim  *resourceapi.ResourceClaim
		pods   []*apiv1.Pod
		remove []*apiv1.Pod
		want   []string
	}{
		{"the pod's own claim is released", allocatedClaim("own-gpu-x", "gpu-1", own, own),
			[]*apiv1.Pod{own}, []*apiv1.Pod{own}, []string{"pool="}},
		{"a shared claim stays allocated while another pod reserves it", allocatedClaim("shared", "gpu-1", nil, a, b),
			[]*apiv1.Pod{a, b}, []*apiv1.Pod{a}, []string{"pool=gpu-1", "b"}},
		{"a shared claim no pod reserves any more is released", allocatedClaim("shared", "gpu-1", nil, a, b),
			[]*apiv1.Pod{a, b}, []*apiv1.Pod{a, b}, []string{"pool="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newDRAFixture()
			src.claims = []*resourceapi.ResourceClaim{tc.claim}
			h := newDRAHandle(t, src)
			s := h.Snapshot()
			s.Reset([]*apiv1.Node{makeNode("gpu-1", "4").Obj()}, tc.pods)
			before := claimState(t, s, tc.claim.Name)
			s.Fork()
			for _, p := range tc.remove {
				if err := s.RemovePod(p, "gpu-1"); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, claimState(t, s, tc.claim.Name)); diff != "" {
				t.Errorf("claim after RemovePod (-want +got):\n%s", diff)
			}
			s.Revert()
			if diff := cmp.Diff(before, claimState(t, s, tc.claim.Name)); diff != "" {
				t.Errorf("claim after Revert (-want +got):\n%s", diff)
			}
			if tc.claim.Status.Allocation == nil || len(tc.claim.Status.ReservedFor) != len(tc.pods) {
				t.Errorf("the cluster's claim was modified")
			}
		})
	}
}

// A node's removal releases the claims of its pods, so that the drain
// simulation can move a pod with a claim to a node whose devices are free;
// where none is, the pod fits nowhere.
func TestDRARemoveNodeLetsClaimedPodsMove(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		gpu2Busy bool
		want     string
	}{{"a free device elsewhere", false, "gpu-2"}, {"no free device elsewhere", true, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			pod := ownClaimPod("p", "gpu-1", "p-gpu-x")
			src := newDRAFixture()
			src.slices = append(src.slices, gpuSlice("gpu-2", "gpu-0"))
			src.claims = []*resourceapi.ResourceClaim{allocatedClaim("p-gpu-x", "gpu-1", pod, pod)}
			pods := []*apiv1.Pod{pod}
			if tc.gpu2Busy {
				other := ownClaimPod("other", "gpu-2", "other-gpu-x")
				src.claims = append(src.claims, allocatedClaim("other-gpu-x", "gpu-2", other, other))
				pods = append(pods, other)
			}
			h := newDRAHandle(t, src)
			s := h.Snapshot()
			s.Reset([]*apiv1.Node{makeNode("gpu-1", "4").Obj(), makeNode("gpu-2", "4").Obj()}, pods)
			s.Fork()
			if err := s.RemoveNode("gpu-1"); err != nil {
				t.Fatal(err)
			}
			moved := pod.DeepCopy()
			moved.Spec.NodeName = ""
			node, err := h.FitAnywhere(ctx, moved, nil)
			if node != tc.want {
				t.Fatalf("pod of the removed node fits %q (%v), want %q", node, err, tc.want)
			}
			if node != "" {
				if err := s.AddPod(moved, node); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{"pool=gpu-2", "p"}, claimState(t, s, "p-gpu-x")); diff != "" {
					t.Errorf("claim re-allocated (-want +got):\n%s", diff)
				}
			}
			s.Revert()
			if diff := cmp.Diff([]string{"pool=gpu-1", "p"}, claimState(t, s, "p-gpu-x")); diff != "" {
				t.Errorf("claim after Revert (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDRADeviceUsage(t *testing.T) {
	pod := ownClaimPod("p", "gpu-1", "p-gpu-x")
	src := newDRAFixture()
	src.slices = []*resourceapi.ResourceSlice{gpuSlice("gpu-1", "gpu-0", "gpu-1")}
	src.claims = []*resourceapi.ResourceClaim{allocatedClaim("p-gpu-x", "gpu-1", pod, pod)}
	h := newDRAHandle(t, src)
	s := h.Snapshot()
	s.Reset([]*apiv1.Node{makeNode("gpu-1", "4").Obj(), makeNode("plain", "4").Obj()}, []*apiv1.Pod{pod})
	type usage struct{ Allocated, Total int }
	get := func(n string) usage { a, tot := s.DeviceUsage(n); return usage{a, tot} }
	if diff := cmp.Diff(map[string]usage{"gpu-1": {1, 2}, "plain": {0, 0}},
		map[string]usage{"gpu-1": get("gpu-1"), "plain": get("plain")}); diff != "" {
		t.Errorf("device usage (-want +got):\n%s", diff)
	}
	s.Fork()
	if err := s.RemovePod(pod, "gpu-1"); err != nil {
		t.Fatal(err)
	}
	if got := get("gpu-1"); got != (usage{0, 2}) {
		t.Errorf("after the pod's removal: %+v, want 0 of 2", got)
	}
	s.Revert()
	if got := get("gpu-1"); got != (usage{1, 2}) {
		t.Errorf("after Revert: %+v, want 1 of 2", got)
	}
}
