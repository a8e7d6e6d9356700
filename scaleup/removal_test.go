package scaleup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

const removalDriver = "gpu.example.com"

// newDRAOrchestrator is newOrchestrator with the DRA objects objs in the
// simulation's informers.
func newDRAOrchestrator(t testing.TB, provider *fakeprovider.Provider, objs ...runtime.Object) *Orchestrator {
	t.Helper()
	ctx := context.Background()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	sim, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory,
		framework.WithDRA(framework.NewInformerDRASource(factory)))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	opts := DefaultOptions()
	chain, err := expander.NewChain(ctx, opts.Expanders, expander.Deps{Random: func(int) int { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	so := clusterstate.DefaultOptions()
	so.Taints = opts.Taints
	return New(provider, sim, estimator.New(sim), chain, opts, clusterstate.NewRegistry(so))
}

func oneDeviceSlice(node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"},
		Spec: resourceapi.ResourceSliceSpec{Driver: removalDriver, NodeName: &node,
			Pool:    resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "gpu-0"}}}}
}

// claimedPod is a pod running on node whose own claim (from a template)
// holds the node's device, with that claim.
func claimedPod(name, node string) (*apiv1.Pod, *resourceapi.ResourceClaim) {
	p := pendingPods(1, "1")[0]
	p.Name, p.UID, p.Spec.NodeName = name, k8stypes.UID("uid-"+name), node
	tmpl, claim := "one-gpu", name+"-gpu"
	p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	p.Status.ResourceClaimStatuses = []apiv1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
	yes := true
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claim,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: p.UID, Controller: &yes}}},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 1,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: removalDriver, Pool: node, Device: "gpu-0"}}},
				NodeSelector: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{MatchFields: []apiv1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: apiv1.NodeSelectorOpIn, Values: []string{node}}}}}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: p.UID}}}}
	return p, c
}

// TestTryRemoveReallocatesClaims: the pod of n1, whose claim holds n1's
// only device, moves to n2 when n2's device is free (its claim allocated
// anew there) and the removal is refused, naming the claim, when it is not.
func TestTryRemoveReallocatesClaims(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		n2Busy   bool
		wantErr  string
		wantUsed [2]int // n2's allocated and total devices after
	}{
		{name: "free device elsewhere", wantUsed: [2]int{1, 1}},
		{name: "no free device elsewhere", n2Busy: true, wantErr: "resource claim(s) default/p-gpu", wantUsed: [2]int{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("gpu", 0, 10, 2, templateNode("gpu", "4"))
			n1, n2 := templateNode("n1", "4"), templateNode("n2", "4")
			provider.AddNode("gpu", n1)
			provider.AddNode("gpu", n2)
			class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
				Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
					CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + removalDriver + `"`}}}}}
			p, claim := claimedPod("p", "n1")
			pods := []*apiv1.Pod{p}
			objs := []runtime.Object{class, oneDeviceSlice("n1"), oneDeviceSlice("n2"), claim}
			if tc.n2Busy {
				q, qc := claimedPod("q", "n2")
				pods, objs = append(pods, q), append(objs, qc)
			}
			o := newDRAOrchestrator(t, provider, objs...)
			in := Input{Now: time.Now(), Nodes: []*apiv1.Node{n1, n2}, ScheduledPods: pods}
			if err := o.state.Update(ctx, provider, in.Nodes, in.Now); err != nil {
				t.Fatal(err)
			}
			s := o.Begin(ctx, in)
			if a, total := s.DeviceUsage("n1"); a != 1 || total != 1 {
				t.Fatalf("n1 uses %d of %d devices, want 1 of 1", a, total)
			}
			err := s.TryRemoveWhy(ctx, "n1", []*apiv1.Pod{p}, nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("removal refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("removal: %v, want an error with %q", err, tc.wantErr)
			}
			if a, total := s.DeviceUsage("n2"); [2]int{a, total} != tc.wantUsed {
				t.Errorf("n2 uses %d of %d devices, want %v", a, total, tc.wantUsed)
			}
			if c, _ := s.o.sim.Snapshot().Claim("default", "p-gpu"); c.Status.Allocation == nil ||
				(tc.wantErr == "") != (c.Status.Allocation.Devices.Results[0].Pool == "n2") {
				t.Errorf("p's claim after the removal: %+v", c.Status.Allocation)
			}
		})
	}
}

// TestTryRemoveMovesCarriedPodsAgain: the pod of n1 moves onto n2 when n1
// is removed in simulation; removing n2 next must move that pod again. With
// n1 gone there is no room for it, so n2 stays, and the error says the pod
// was carried there. (The removal of n2 used to drop the carried pod with
// the node, so both nodes were found removable and the pod had nowhere to
// run.)
func TestTryRemoveMovesCarriedPodsAgain(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("ng", 0, 10, 2, templateNode("ng", "4"))
	n1, n2 := templateNode("n1", "4"), templateNode("n2", "4")
	provider.AddNode("ng", n1)
	provider.AddNode("ng", n2)
	p := pendingPods(1, "3")[0]
	p.Spec.NodeName = "n1"
	o := newOrchestrator(t, provider, nil)
	in := Input{Now: time.Now(), Nodes: []*apiv1.Node{n1, n2}, ScheduledPods: []*apiv1.Pod{p}}
	if err := o.state.Update(ctx, provider, in.Nodes, in.Now); err != nil {
		t.Fatal(err)
	}
	s := o.Begin(ctx, in)
	if err := s.TryRemoveWhy(ctx, "n1", []*apiv1.Pod{p}, nil); err != nil {
		t.Fatalf("removing n1: %v", err)
	}
	if got := len(s.PodsOn("n2")); got != 1 {
		t.Fatalf("n2 holds %d pods after n1's removal, want the moved one", got)
	}
	err := s.TryRemoveWhy(ctx, "n2", nil, map[string]bool{"n1": true})
	if err == nil || !strings.Contains(err.Error(), "moved onto node n2 by an earlier candidate's simulation") {
		t.Fatalf("removing n2 as well: %v, want a refusal naming the carried pod", err)
	}
	if got := len(s.PodsOn("n2")); got != 1 {
		t.Errorf("n2 holds %d pods after the refused removal, want 1 (the simulation restored)", got)
	}
}

// TestTryRemoveCarriedPodsFollowTheirPod: a pod carried from n1 to n2 moves
// on to n3 when n2 is removed, and removing n3 then finds it there.
func TestTryRemoveCarriedPodsFollowTheirPod(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("ng", 0, 10, 3, templateNode("ng", "4"))
	n1, n2, n3 := templateNode("n1", "4"), templateNode("n2", "4"), templateNode("n3", "4")
	for _, n := range []*apiv1.Node{n1, n2, n3} {
		provider.AddNode("ng", n)
	}
	p := pendingPods(1, "3")[0]
	p.Spec.NodeName = "n1"
	o := newOrchestrator(t, provider, nil)
	in := Input{Now: time.Now(), Nodes: []*apiv1.Node{n1, n2, n3}, ScheduledPods: []*apiv1.Pod{p}}
	if err := o.state.Update(ctx, provider, in.Nodes, in.Now); err != nil {
		t.Fatal(err)
	}
	s := o.Begin(ctx, in)
	avoid := map[string]bool{}
	var removed []string
	for _, n := range []string{"n1", "n2", "n3"} {
		var move []*apiv1.Pod
		if n == "n1" {
			move = []*apiv1.Pod{p}
		}
		if s.TryRemoveWhy(ctx, n, move, avoid) == nil {
			removed = append(removed, n)
			avoid[n] = true
		}
	}
	if len(removed) != 2 {
		t.Fatalf("removable in one pass: %v, want exactly two of three (the pod needs one node)", removed)
	}
	total := 0
	for _, n := range []string{"n1", "n2", "n3"} {
		if !avoid[n] {
			total += len(s.PodsOn(n))
		}
	}
	if total != 1 {
		t.Errorf("the remaining node holds %d pods, want the one pod", total)
	}
}

// TestTryRemoveContinuesWhereThePreviousPodWent: the removal simulation
// looks for a moved pod's node from where the previous moved pod went, so
// that the nodes earlier removals filled are not asked again about every
// pod (which made the drain simulation of 2,000 candidates among 15,000
// nodes quadratic: out of its 30 s after about 1,000 of them). d1 has 1 CPU
// free, d2 4: r1's 2-CPU pod goes to d2, and r2's 1-CPU pod, which d1 could
// take, goes to d2 too, where the search resumed.
func TestTryRemoveContinuesWhereThePreviousPodWent(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("g", 0, 10, 4, templateNode("g", "4"))
	var nodes []*apiv1.Node
	for _, name := range []string{"d1", "d2", "r1", "r2"} {
		n := templateNode(name, "4")
		provider.AddNode("g", n)
		nodes = append(nodes, n)
	}
	pod := func(name, node, cpu string) *apiv1.Pod {
		p := pendingPods(1, cpu)[0]
		p.Name, p.UID, p.Spec.NodeName = name, k8stypes.UID(name), node
		return p
	}
	busy, big, small := pod("busy", "d1", "3"), pod("big", "r1", "2"), pod("small", "r2", "1")
	o := newOrchestrator(t, provider, nil)
	in := Input{Now: time.Now(), Nodes: nodes, ScheduledPods: []*apiv1.Pod{busy, big, small}}
	if err := o.state.Update(ctx, provider, in.Nodes, in.Now); err != nil {
		t.Fatal(err)
	}
	s := o.Begin(ctx, in)
	removed := map[string]bool{}
	for _, r := range []struct {
		node string
		pod  *apiv1.Pod
	}{{"r1", big}, {"r2", small}} {
		if err := s.TryRemoveWhy(ctx, r.node, []*apiv1.Pod{r.pod}, removed); err != nil {
			t.Fatalf("removing %s: %v", r.node, err)
		}
		removed[r.node] = true
	}
	snap := o.sim.Snapshot()
	got := map[string]int{}
	for _, n := range []string{"d1", "d2"} {
		pods, err := snap.Pods(n)
		if err != nil {
			t.Fatal(err)
		}
		got[n] = len(pods)
	}
	if want := map[string]int{"d1": 1, "d2": 2}; got["d1"] != want["d1"] || got["d2"] != want["d2"] {
		t.Errorf("pods per node after both removals = %v, want %v", got, want)
	}
}

// TestBeginLoadsNodesInNameOrder: the informer lists nodes in a random
// order; the snapshot holds them in name order, so that pending pods are
// offered to existing nodes in the same order in every loop (and in
// explain's prediction of the loop).
func TestBeginLoadsNodesInNameOrder(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("ng", 0, 10, 3, templateNode("ng", "4"))
	var nodes []*apiv1.Node
	for _, name := range []string{"n-c", "n-a", "n-b"} {
		n := templateNode(name, "4")
		provider.AddNode("ng", n)
		nodes = append(nodes, n)
	}
	o := newOrchestrator(t, provider, nil)
	in := Input{Now: time.Now(), Nodes: nodes, ScheduledPods: nil}
	if err := o.state.Update(ctx, provider, in.Nodes, in.Now); err != nil {
		t.Fatal(err)
	}
	o.Begin(ctx, in)
	if diff := cmp.Diff([]string{"n-a", "n-b", "n-c"}, o.sim.Snapshot().NodeNames()); diff != "" {
		t.Errorf("snapshot node order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n-c", "n-a", "n-b"}, []string{nodes[0].Name, nodes[1].Name, nodes[2].Name}); diff != "" {
		t.Errorf("the caller's node list was reordered (-want +got):\n%s", diff)
	}
}
