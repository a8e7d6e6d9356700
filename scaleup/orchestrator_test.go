package scaleup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

func templateNode(name, cpu string) *apiv1.Node {
	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse("16Gi"),
		apiv1.ResourcePods: resource.MustParse("110")}
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"group": name}},
		Status: apiv1.NodeStatus{Capacity: rl, Allocatable: rl,
			Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}}
}

func pendingPods(n int, cpu string) []*apiv1.Pod {
	yes := true
	out := make([]*apiv1.Pod, n)
	for i := range out {
		out[i] = &apiv1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("p-%d", i), UID: types.UID(fmt.Sprintf("p-%d", i)),
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: &yes}}},
			Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{
				Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}}}}},
		}
	}
	return out
}

func newOrchestrator(t testing.TB, provider *fakeprovider.Provider, mutate func(*Options)) *Orchestrator {
	t.Helper()
	ctx := context.Background()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	sim, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	opts := DefaultOptions()
	if mutate != nil {
		mutate(&opts)
	}
	chain, err := expander.NewChain(ctx, opts.Expanders, expander.Deps{Random: func(int) int { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	so := clusterstate.DefaultOptions()
	so.Taints = opts.Taints
	return New(provider, sim, estimator.New(sim), chain, opts, clusterstate.NewRegistry(so))
}

// runLoop updates the cluster state as the loop does, then decides.
func runLoop(ctx context.Context, o *Orchestrator, in Input) (Result, error) {
	if err := o.state.Update(ctx, o.provider, in.Nodes, in.Now); err != nil {
		return Result{}, err
	}
	return o.Run(ctx, in)
}

func increases(res Result) map[string]int {
	out := map[string]int{}
	for _, inc := range res.Increases {
		out[inc.NodeGroup] += inc.To - inc.From
	}
	return out
}

func TestScaleUpDecisions(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	o := newOrchestrator(t, provider, nil)
	pods := pendingPods(10, "1")

	res, err := runLoop(ctx, o, Input{Now: now, Pending: pods})
	if err != nil {
		t.Fatal(err)
	}
	if got := increases(res); got["small"] != 3 || got["large"] != 0 {
		t.Fatalf("first loop increases = %v, want small +3", got)
	}

	// The nodes have not registered: they are upcoming, the same pods fit them.
	res, err = runLoop(ctx, o, Input{Now: now.Add(10 * time.Second), Pending: pods})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Increases) != 0 || res.FitExisting != 10 {
		t.Fatalf("second loop: increases %v, fitExisting %d; want none and 10", increases(res), res.FitExisting)
	}

	// One new instance fails out of capacity: the group is backed off at once
	// and the pods it was for go to the other group.
	ng, _ := provider.NodeGroups(ctx)
	small, _ := ng[0].Nodes(ctx)
	provider.SetInstanceStatus("small", small[0].Id, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
		ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT"}})
	res, err = runLoop(ctx, o, Input{Now: now.Add(20 * time.Second), Pending: pods})
	if err != nil {
		t.Fatal(err)
	}
	if f := o.state.Failures(); len(f) != 1 || f[0].NodeGroup != "small" || f[0].Reason.ErrorCode != "STOCKOUT" {
		t.Errorf("failures = %+v, want small backed off for STOCKOUT", f)
	}
	if got := increases(res); got["small"] != 0 || got["large"] != 1 {
		t.Errorf("after the failure increases = %v, want large +1 for the pods the failed node was for", got)
	}
	// The failure is counted once, not every loop.
	res, _ = runLoop(ctx, o, Input{Now: now.Add(30 * time.Second), Pending: pods})
	if f := o.state.Failures(); len(f) != 0 || len(res.Increases) != 0 {
		t.Errorf("a later loop: new failures %+v, increases %v; want none", f, increases(res))
	}
}

func TestScaleUpLimits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   int
		reason string
	}{
		{name: "max nodes total", mutate: func(o *Options) { o.MaxNodesTotal = 2 }, want: 2, reason: "max total nodes in cluster reached (--max-nodes-total=2)"},
		{name: "cores total", mutate: func(o *Options) { o.Cores.Max = 4 }, want: 1, reason: "max cluster cpu limit reached (--cores-total max 4)"},
		{name: "max nodes per scale-up", mutate: func(o *Options) { o.MaxNodesPerScaleUp = 1 }, want: 3},
		{name: "group max", mutate: nil, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			max := 10
			if tc.mutate == nil {
				max = 2
			}
			provider.AddNodeGroup("small", 0, max, 0, templateNode("small", "4"))
			o := newOrchestrator(t, provider, tc.mutate)
			res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(12, "1")})
			if err != nil {
				t.Fatal(err)
			}
			if got := increases(res)["small"]; got != tc.want {
				t.Errorf("small +%d, want +%d", got, tc.want)
			}
			for _, reason := range res.Remaining {
				if tc.reason != "" && !strings.Contains(reason, tc.reason) {
					t.Errorf("remaining pod reason %q, want one mentioning %q", reason, tc.reason)
				}
			}
		})
	}
}

// TestTemplateFromNodesExpires: a group that had a ready node keeps the
// template made from it while it has none, for --node-info-cache-expire-time.
func TestTemplateFromNodesExpires(t *testing.T) {
	p := fakeprovider.NewProvider()
	g := p.AddNodeGroup("g", 0, 5, 1, nil)
	o := newOrchestrator(t, p, func(o *Options) { o.NodeInfoCacheExpireTime = time.Hour })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ready := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: apiv1.NodeStatus{
		Conditions:  []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}},
		Allocatable: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("4")}}}
	st := &clusterstate.GroupState{NodeGroup: g, Nodes: []*apiv1.Node{ready}}
	if o.templateFromNodes(st, t0, nil, nil, nil) == nil {
		t.Fatal("no template from a ready node")
	}
	st.Nodes = nil
	if o.templateFromNodes(st, t0.Add(59*time.Minute), nil, nil, nil) == nil {
		t.Error("the template made 59m ago was dropped within the expiry")
	}
	if o.templateFromNodes(st, t0.Add(61*time.Minute), nil, nil, nil) != nil {
		t.Error("the template made 61m ago is still used past --node-info-cache-expire-time=1h")
	}
}

// TestGPUTotal: --gpu-total caps the GPUs of a type the scale-up may reach,
// nodes that exist counted; other types are not limited.
func TestGPUTotal(t *testing.T) {
	ctx := context.Background()
	gpuTemplate := func(name, gpuType string) *apiv1.Node {
		n := templateNode(name, "4")
		n.Labels = map[string]string{"fake.gpu/type": gpuType}
		n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("2")
		n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("2")
		return n
	}
	for _, tc := range []struct {
		name     string
		limit    string
		existing bool
		want     int
	}{
		{name: "no limit", want: 3},
		{name: "4 t4 GPUs: 2 nodes", limit: "t4", want: 2},
		{name: "4 t4 GPUs, 2 in use: 1 node", limit: "t4", existing: true, want: 1},
		{name: "a limit of another type", limit: "a100", want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("gpu", 0, 10, 0, gpuTemplate("gpu", "t4"))
			o := newOrchestrator(t, provider, func(o *Options) {
				if tc.limit != "" {
					o.GPUTotal = []config.GPULimit{{Type: tc.limit, Min: 0, Max: 4}}
				}
			})
			in := Input{Now: time.Now(), Pending: pendingPods(12, "1")}
			if tc.existing {
				n := gpuTemplate("busy", "t4")
				n.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}
				in.Nodes = []*apiv1.Node{n}
			}
			res, err := runLoop(ctx, o, in)
			if err != nil {
				t.Fatal(err)
			}
			if got := increases(res)["gpu"]; got != tc.want {
				t.Errorf("gpu +%d, want +%d", got, tc.want)
			}
			if tc.want < 3 {
				found := false
				for _, reason := range res.Remaining {
					found = found || strings.Contains(reason, "--gpu-total")
				}
				if !found {
					t.Errorf("no remaining pod names the GPU limit: %v", res.Remaining)
				}
			}
		})
	}
}
