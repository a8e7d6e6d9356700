package scaleup

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

func zonal(name, zone, cpu string) *apiv1.Node {
	n := templateNode(name, cpu)
	n.Labels = map[string]string{"kind": "general", apiv1.LabelTopologyZone: zone, apiv1.LabelHostname: name}
	return n
}

func TestSimilarity(t *testing.T) {
	base := func() *apiv1.Node { return zonal("a", "z1", "4") }
	for _, tc := range []struct {
		name   string
		other  func() *apiv1.Node
		mutate func(*Options)
		want   bool
	}{
		{name: "other zone and hostname", other: func() *apiv1.Node { return zonal("b", "z2", "4") }, want: true},
		{name: "other cpu", other: func() *apiv1.Node { return zonal("b", "z2", "8") }, want: false},
		{name: "memory within 1.5%", other: func() *apiv1.Node {
			n := zonal("b", "z2", "4")
			n.Status.Capacity[apiv1.ResourceMemory] = resource.MustParse("16200Mi")
			n.Status.Allocatable[apiv1.ResourceMemory] = resource.MustParse("16200Mi")
			return n
		}, want: true},
		{name: "memory 10% apart", other: func() *apiv1.Node {
			n := zonal("b", "z2", "4")
			n.Status.Capacity[apiv1.ResourceMemory] = resource.MustParse("18Gi")
			n.Status.Allocatable[apiv1.ResourceMemory] = resource.MustParse("18Gi")
			return n
		}, want: false},
		{name: "other label", other: func() *apiv1.Node {
			n := zonal("b", "z2", "4")
			n.Labels["kind"] = "gpu"
			return n
		}, want: false},
		{name: "other label ignored by flag", other: func() *apiv1.Node {
			n := zonal("b", "z2", "4")
			n.Labels["kind"] = "gpu"
			return n
		}, mutate: func(o *Options) { o.BalancingIgnoreLabels = []string{"kind"} }, want: true},
		{name: "balancing label decides alone", other: func() *apiv1.Node { return zonal("b", "z2", "64") },
			mutate: func(o *Options) { o.BalancingLabels = []string{"kind"} }, want: true},
		{name: "balancing label missing", other: func() *apiv1.Node { return zonal("b", "z2", "4") },
			mutate: func(o *Options) { o.BalancingLabels = []string{"team"} }, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			if tc.mutate != nil {
				tc.mutate(&opts)
			}
			s := newSimilarity(opts)
			a, b := &cloudprovider.NodeInfo{Node: base()}, &cloudprovider.NodeInfo{Node: tc.other()}
			if got := s.similar(a, b); got != tc.want {
				t.Errorf("similar = %v, want %v", got, tc.want)
			}
			if got := s.similar(b, a); got != tc.want {
				t.Errorf("similar (swapped) = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBalancedScaleUp(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("zone-a", 0, 10, 2, zonal("zone-a", "z1", "4"))
	provider.AddNodeGroup("zone-b", 0, 10, 0, zonal("zone-b", "z2", "4"))
	provider.AddNodeGroup("zone-c", 0, 3, 0, zonal("zone-c", "z3", "4"))
	provider.AddNodeGroup("big", 0, 10, 0, zonal("big", "z1", "64"))
	// The two zone-a nodes exist and are full.
	var nodes []*apiv1.Node
	var scheduled []*apiv1.Pod
	for i, name := range []string{"a-0", "a-1"} {
		n := zonal(name, "z1", "4")
		provider.AddNode("zone-a", n)
		nodes = append(nodes, n)
		p := pendingPods(1, "4")[0]
		p.Name, p.UID, p.Spec.NodeName = name+"-full", types.UID(fmt.Sprintf("full-%d", i)), name
		scheduled = append(scheduled, p)
	}
	o := newOrchestrator(t, provider, func(o *Options) {
		o.BalanceSimilarNodeGroups = true
		o.Expanders = []string{config.LeastWasteExpander}
	})
	// 32 one-CPU pods need 8 nodes of 4 CPU; least-waste prefers them to a
	// 64-CPU node. Balanced over the zones: a has 2 already, c stops at 3.
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Nodes: nodes, ScheduledPods: scheduled, Pending: pendingPods(32, "1")})
	if err != nil {
		t.Fatal(err)
	}
	got := increases(res)
	if got["zone-a"] != 2 || got["zone-b"] != 3 || got["zone-c"] != 3 || got["big"] != 0 {
		t.Errorf("increases %v, want zone-a +2, zone-b +3, zone-c +3 (sizes 4, 3, 3)", got)
	}
	decisions := map[int]bool{}
	for _, inc := range res.Increases {
		decisions[inc.Decision] = true
		if len(inc.Pods) != 32 {
			t.Errorf("%s serves %d pods, want the decision's 32", inc.NodeGroup, len(inc.Pods))
		}
	}
	if len(decisions) != 1 {
		t.Errorf("decisions %v, want one balanced decision", decisions)
	}
}

type daemonSets []*appsv1.DaemonSet

func (d daemonSets) List(labels.Selector) ([]*appsv1.DaemonSet, error) { return d, nil }

// A group without TemplateNodeInfo is scaled from a copy of its ready node,
// and DaemonSet pods take their share of every template.
func TestTemplateFromRealNodeWithDaemonSets(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("no-template", 0, 10, 1, nil)
	real := zonal("real-0", "z1", "4")
	provider.AddNode("no-template", real)
	full := pendingPods(1, "4")[0]
	full.Name, full.UID, full.Spec.NodeName = "full", "full", real.Name
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "agent"},
		Spec: appsv1.DaemonSetSpec{Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{
			Name: "c", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
				apiv1.ResourceCPU: resource.MustParse("1")}}}}}}}}
	o := newOrchestrator(t, provider, nil)
	WithDaemonSets(daemonSets{ds})(o)
	// Eight one-CPU pods: three fit beside the agent on each new 4-CPU node
	// (two nodes would do without it).
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Nodes: []*apiv1.Node{real}, ScheduledPods: []*apiv1.Pod{full},
		Pending: pendingPods(8, "1")})
	if err != nil {
		t.Fatal(err)
	}
	if got := increases(res)["no-template"]; got != 3 {
		t.Errorf("no-template +%d, want +3 (remaining: %v)", got, res.Remaining)
	}
}
