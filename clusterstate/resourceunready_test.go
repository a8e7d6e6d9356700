package clusterstate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

func gpuNode(name string, ready bool, created time.Time, allocatable string) *apiv1.Node {
	n := node(name, ready, created)
	n.Labels = map[string]string{"fake.gpu/type": "t4"}
	if allocatable != "" {
		n.Status.Allocatable = apiv1.ResourceList{"nvidia.com/gpu": resource.MustParse(allocatable)}
	}
	return n
}

// TestResourceUnreadyCountedAsUpstream: a Ready node whose GPU is not
// allocatable yet has not started while young and is unready, counted as
// resourceUnready, once older than the start-up time; a NotReady node is
// unready but not resourceUnready, a GPU node that allocates its GPUs is
// ready.
func TestResourceUnreadyCountedAsUpstream(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("gpu", 0, 10, 5, nil)
	old, young := t0.Add(-time.Hour), t0.Add(-time.Minute)
	nodes := []*apiv1.Node{
		gpuNode("allocated", true, old, "1"),
		gpuNode("no-gpu-yet-old", true, old, ""),
		gpuNode("zero-gpus-old", true, old, "0"),
		gpuNode("no-gpu-yet-young", true, young, ""),
		gpuNode("not-ready", false, old, ""),
	}
	for _, n := range nodes {
		p.AddNode("gpu", n)
	}
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nodes, t0)
	want := NodeCountsStat{Registered: RegisteredStat{Total: 5, Ready: 1, NotStarted: 1,
		Unready: UnreadyStat{Total: 3, ResourceUnready: 2}}}
	st := r.Status(t0, nil)
	if diff := cmp.Diff(want, st.ClusterWide.Health.NodeCounts); diff != "" {
		t.Errorf("cluster node counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, st.NodeGroups[0].Health.NodeCounts); diff != "" {
		t.Errorf("group node counts (-want +got):\n%s", diff)
	}
	if got := r.Group("gpu").NotStartedNodes; !cmp.Equal(got, []string{"no-gpu-yet-young"}) {
		t.Errorf("not started nodes %v, want the young node without GPUs (simulated as upcoming)", got)
	}
}

// TestScaleDownProbeTimeAsUpstream: the scaleDown conditions' probe time is
// when scale-down last planned: null before it first does, and kept by
// loops that do not plan, while health and scale-up are probed every loop.
func TestScaleDownProbeTimeAsUpstream(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("a", 0, 10, 1, nil)
	nodes := addNodes(p, "a", 1, true, t0.Add(-time.Hour))
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nodes, t0)
	st := r.Status(t0, nil)
	if !st.ClusterWide.ScaleDown.LastProbeTime.IsZero() || !st.NodeGroups[0].ScaleDown.LastProbeTime.IsZero() {
		t.Errorf("scaleDown probed at %v (group %v) before scale-down planned, want null",
			st.ClusterWide.ScaleDown.LastProbeTime, st.NodeGroups[0].ScaleDown.LastProbeTime)
	}
	r.ScaleDownProbed(t0)
	t1 := t0.Add(10 * time.Second)
	update(t, r, p, nodes, t1) // a loop that does not plan scale-down
	st = r.Status(t1, nil)
	want := metav1.NewTime(t0)
	for what, got := range map[string]metav1.Time{"cluster": st.ClusterWide.ScaleDown.LastProbeTime,
		"group": st.NodeGroups[0].ScaleDown.LastProbeTime} {
		if !got.Equal(&want) {
			t.Errorf("%s scaleDown time %v, want the last planning's %v", what, got, want)
		}
	}
	if got := st.ClusterWide.Health.LastProbeTime; !got.Equal(&metav1.Time{Time: t1}) {
		t.Errorf("health probed at %v, want the loop's %v", got, t1)
	}
}

// TestResourceUnreadyCountsNodesOfNoGroup: upstream's GPU-label rule holds
// for a node no group manages too: Ready, labelled with the provider's GPU
// label, its GPU not allocatable: unready and resourceUnready once older
// than the start-up time.
func TestResourceUnreadyCountsNodesOfNoGroup(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("gpu", 0, 10, 0, nil)
	nodes := []*apiv1.Node{gpuNode("stray", true, t0.Add(-time.Hour), "")}
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nodes, t0)
	want := NodeCountsStat{Registered: RegisteredStat{Total: 1, Unready: UnreadyStat{Total: 1, ResourceUnready: 1}}}
	if diff := cmp.Diff(want, r.Status(t0, nil).ClusterWide.Health.NodeCounts); diff != "" {
		t.Errorf("cluster node counts (-want +got):\n%s", diff)
	}
}
