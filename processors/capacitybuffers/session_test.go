package capacitybuffers

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

func fourCPUNode(name string) *apiv1.Node {
	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("4"), apiv1.ResourceMemory: resource.MustParse("16Gi"),
		apiv1.ResourcePods: resource.MustParse("110")}
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "g"}},
		Status: apiv1.NodeStatus{Capacity: rl, Allocatable: rl,
			Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue,
				LastTransitionTime: metav1.Unix(0, 0)}}}}
}

// session begins a real scale-up session on one registered, empty 4-CPU
// node of group g (max 5).
func session(t *testing.T) (*scaleup.Session, *fakeprovider.Provider) {
	t.Helper()
	return sessionOfTarget(t, 1)
}

// sessionOfTarget is session with group g's target at target: the nodes
// beyond n1 are upcoming.
func sessionOfTarget(t *testing.T, target int) (*scaleup.Session, *fakeprovider.Provider) {
	t.Helper()
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("g", 0, 5, target, fourCPUNode("template"))
	node := fourCPUNode("n1")
	provider.AddNode("g", node)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	sim, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	opts := config.Defaults()
	chain, err := expander.NewChain(ctx, opts.Expanders, expander.Deps{Random: func(int) int { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	state := clusterstate.NewRegistry(clusterstate.DefaultOptions())
	nodes := []*apiv1.Node{node}
	if err := state.Update(ctx, provider, nodes, now); err != nil {
		t.Fatal(err)
	}
	o := scaleup.New(provider, sim, estimator.New(sim), chain, scaleup.DefaultOptions(), state)
	return o.Begin(ctx, scaleup.Input{Now: now, Nodes: nodes}), provider
}

func pendingReal(name, cpu string) *apiv1.Pod {
	return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

// TestRealPodsGetTheRoomFirst: a real pod and a buffer pod both fit the
// empty node, but not together: the real pod gets it, and the buffer's pod
// makes the group grow.
func TestRealPodsGetTheRoomFirst(t *testing.T) {
	f := newFakes()
	f.template("shape", "3")
	f.buffer("spare", "shape", 1, "")
	s, _ := session(t)
	pending := New(f, f, f).ProcessPods(context.Background(), &processors.Loop{Now: now}, []*apiv1.Pod{pendingReal("web", "3")})
	res := s.ScaleUp(context.Background(), pending)
	if res.FitExisting != 1 || len(res.Increases) != 1 || res.Increases[0].To-res.Increases[0].From != 1 {
		t.Fatalf("fit %d, increases %+v; want the real pod on n1 and one node for the buffer", res.FitExisting, res.Increases)
	}
	if served := res.Increases[0].Pods; len(served) != 1 || !capacitybuffer.IsFakePod(served[0]) {
		t.Errorf("the new node is for %v, want the buffer's pod", served)
	}
	on := s.PodsOn("n1")
	if len(on) != 1 || on[0].Name != "web" {
		t.Errorf("n1 holds %v, want the real pod", on)
	}
}

// TestBufferPodsHoldRoomOnExistingNodes: buffer pods that fit existing
// nodes are placed there in the session, so the scale-down (which counts
// the session's pods on a node) keeps the node, and no node is added.
func TestBufferPodsHoldRoomOnExistingNodes(t *testing.T) {
	f := newFakes()
	f.template("shape", "1")
	f.buffer("spare", "shape", 2, "")
	s, _ := session(t)
	pending := New(f, f, f).ProcessPods(context.Background(), &processors.Loop{Now: now}, nil)
	res := s.ScaleUp(context.Background(), pending)
	if res.FitExisting != 2 || len(res.Increases) != 0 {
		t.Fatalf("fit %d, increases %+v; want both pods on n1, no scale-up", res.FitExisting, res.Increases)
	}
	on := s.PodsOn("n1")
	if len(on) != 2 || !capacitybuffer.IsFakePod(on[0]) || !capacitybuffer.IsFakePod(on[1]) {
		t.Errorf("n1 holds %v, want the buffer's two pods", on)
	}
}
