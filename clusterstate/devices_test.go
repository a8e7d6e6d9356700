package clusterstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

func slice(nodeName, driver string, gen int64, devices int) *resourceapi.ResourceSlice {
	sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: &nodeName,
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: gen, ResourceSliceCount: 1}}}
	for i := 0; i < devices; i++ {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: "d" + string(rune('a'+i))})
	}
	return sl
}

func withGPUs(n *apiv1.Node, count int64) *apiv1.Node {
	n = n.DeepCopy()
	if n.Status.Allocatable == nil {
		n.Status.Allocatable = apiv1.ResourceList{}
	}
	n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(count, resource.DecimalSI)
	return n
}

func TestDevicesUnready(t *testing.T) {
	plain := node("n", true, t0)
	dra := map[string]int{"gpu.example.com": 2, "nic.example.com": 1}
	gpuTmpl := withGPUs(node("t", true, t0), 4)
	for _, tc := range []struct {
		name            string
		node, tmplNode  *apiv1.Node
		want, published map[string]int
		labelled        bool
		reason          string
	}{
		{name: "no devices expected", node: plain, tmplNode: node("t", true, t0)},
		{name: "all DRA devices published", node: plain, want: dra,
			published: map[string]int{"gpu.example.com": 2, "nic.example.com": 1}},
		{name: "no slice yet", node: plain, want: dra,
			reason: "DRA driver gpu.example.com published 0 of the 2 devices of the node group's nodes"},
		{name: "one driver missing", node: plain, want: dra, published: map[string]int{"gpu.example.com": 2},
			reason: "DRA driver nic.example.com published 0 of the 1 devices of the node group's nodes"},
		{name: "GPU label, resource absent (upstream's rule)", node: plain, labelled: true,
			reason: "GPU resource nvidia.com/gpu is not allocatable yet"},
		{name: "GPU label, resource zero", node: withGPUs(plain, 0), labelled: true,
			reason: "GPU resource nvidia.com/gpu is not allocatable yet"},
		{name: "GPU label, resource there", node: withGPUs(plain, 8), labelled: true},
		{name: "GPU label on a DRA group: no device plugin to wait for", node: plain, labelled: true, want: dra,
			published: map[string]int{"gpu.example.com": 2, "nic.example.com": 1}},
		{name: "template has the GPU resource, node not yet", node: plain, tmplNode: gpuTmpl,
			reason: "GPU resource nvidia.com/gpu is not allocatable yet"},
		{name: "template has the GPU resource, node too", node: withGPUs(plain, 4), tmplNode: gpuTmpl},
	} {
		got := devicesUnready(tc.node, tc.tmplNode, tc.want, tc.published, tc.labelled, "nvidia.com/gpu")
		if got != tc.reason {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.reason)
		}
	}
}

// slicedProvider is the fake provider whose groups' templates carry the
// ResourceSlices of tmplSlices.
type slicedProvider struct {
	*fakeprovider.Provider
	tmplSlices map[string][]*resourceapi.ResourceSlice
}

type slicedGroup struct {
	cloudprovider.NodeGroup
	slices []*resourceapi.ResourceSlice
}

func (g slicedGroup) TemplateNodeInfo(ctx context.Context) (*cloudprovider.NodeInfo, error) {
	info, err := g.NodeGroup.TemplateNodeInfo(ctx)
	if err != nil {
		return nil, err
	}
	info.ResourceSlices = g.slices
	return info, nil
}

func (p slicedProvider) NodeGroups(ctx context.Context) ([]cloudprovider.NodeGroup, error) {
	ngs, err := p.Provider.NodeGroups(ctx)
	for i, ng := range ngs {
		ngs[i] = slicedGroup{NodeGroup: ng, slices: p.tmplSlices[ng.Id()]}
	}
	return ngs, err
}

func (p slicedProvider) NodeGroupForNode(ctx context.Context, n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	ng, err := p.Provider.NodeGroupForNode(ctx, n)
	if ng == nil || err != nil {
		return ng, err
	}
	return slicedGroup{NodeGroup: ng, slices: p.tmplSlices[ng.Id()]}, nil
}

type sliceList struct {
	list []*resourceapi.ResourceSlice
	err  error
}

func (l *sliceList) ResourceSlices() ([]*resourceapi.ResourceSlice, error) { return l.list, l.err }

// TestRegistryCountsNodesWithoutDevicesAsNotReady: a node whose Ready
// condition is true but whose template's DRA devices are not published
// (or whose GPU resource is not there) counts as not started while young
// (upcoming, no second scale-up) and as resource unready after its startup
// time; once its devices appear it is ready.
func TestRegistryCountsNodesWithoutDevicesAsNotReady(t *testing.T) {
	fp := fakeprovider.NewProvider()
	fp.AddNodeGroup("dra", 0, 10, 2, node("dra-template", true, t0))
	fp.AddNodeGroup("gpu", 0, 10, 1, node("gpu-template", true, t0))
	young, old := node("dra-young", true, t0.Add(-time.Minute)), node("dra-old", true, t0.Add(-time.Hour))
	fp.AddNode("dra", young)
	fp.AddNode("dra", old)
	gpu := node("gpu-young", true, t0.Add(-time.Minute))
	gpu.Labels = map[string]string{fp.GPULabel(): "a100"}
	fp.AddNode("gpu", gpu)
	p := slicedProvider{Provider: fp, tmplSlices: map[string][]*resourceapi.ResourceSlice{
		"dra": {slice("dra-template", "gpu.example.com", 1, 2)}}}
	// The old node's pool has a newer generation without devices: the
	// stale slice does not count.
	lister := &sliceList{list: []*resourceapi.ResourceSlice{slice("dra-old", "gpu.example.com", 1, 2),
		slice("dra-old", "gpu.example.com", 2, 0)}}
	nodes := []*apiv1.Node{young, old, gpu}
	r := NewRegistry(DefaultOptions(), WithResourceSlices(lister))
	update(t, r, p, nodes, t0)

	type view struct {
		Counts                          NodeCounts
		NotStarted, ResourceUnreadyList []string
	}
	got := map[string]view{}
	for _, id := range []string{"dra", "gpu"} {
		gs := r.Group(id)
		got[id] = view{gs.Counts, gs.NotStartedNodes, gs.ResourceUnreadyNodes}
	}
	want := map[string]view{
		"dra": {Counts: NodeCounts{Unready: 1, NotStarted: 1, ResourceUnready: 1}, NotStarted: []string{"dra-young"},
			ResourceUnreadyList: []string{"dra-young", "dra-old"}},
		"gpu": {Counts: NodeCounts{NotStarted: 1}, NotStarted: []string{"gpu-young"}, ResourceUnreadyList: []string{"gpu-young"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("before the devices (-want +got):\n%s", diff)
	}
	if st := r.Status(t0, nil).ClusterWide.Health.NodeCounts.Registered; st.Ready != 0 || st.Unready.ResourceUnready != 1 ||
		st.Unready.Total != 1 || st.NotStarted != 2 {
		t.Errorf("status counts %+v, want none ready, 2 not started, 1 unready for resources", st)
	}
	if gs := r.Group("dra"); gs.DevicesReadiness("dra-young", Ready) != NotStarted ||
		gs.DevicesReadiness("dra-old", Ready) != Unready || gs.DevicesReadiness("other", Ready) != Ready {
		t.Error("DevicesReadiness does not follow the registry's counts")
	}

	// The drivers publish, the device plugin reports its GPUs.
	lister.list = append(lister.list, slice("dra-young", "gpu.example.com", 1, 2), slice("dra-old", "gpu.example.com", 3, 2))
	nodes[2] = withGPUs(gpu, 8)
	update(t, r, p, nodes, t0.Add(time.Second))
	if c := r.ClusterCounts(); c != (NodeCounts{Ready: 3}) {
		t.Errorf("after the devices: cluster counts %+v, want 3 ready", c)
	}

	// A listing failure does not make nodes unready.
	lister.err, lister.list = errors.New("boom"), nil
	update(t, r, p, nodes, t0.Add(2*time.Second))
	if c := r.ClusterCounts(); c != (NodeCounts{Ready: 3}) {
		t.Errorf("slices unlisted: cluster counts %+v, want 3 ready", c)
	}
}

// TestRegistryExpectsTheDevicesOfPeersWithoutTemplate: a group without a
// provider template (templated from its nodes) expects each node to
// publish as many devices per driver as its other nodes do.
func TestRegistryExpectsTheDevicesOfPeersWithoutTemplate(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("copied", 0, 10, 2, nil)
	p.AddNodeGroup("plain", 0, 10, 1, nil)
	old, young := node("copied-old", true, t0.Add(-time.Hour)), node("copied-young", true, t0.Add(-time.Minute))
	other := node("plain-0", true, t0.Add(-time.Minute))
	p.AddNode("copied", old)
	p.AddNode("copied", young)
	p.AddNode("plain", other)
	lister := &sliceList{list: []*resourceapi.ResourceSlice{slice("copied-old", "gpu.example.com", 1, 2)}}
	r := NewRegistry(DefaultOptions(), WithResourceSlices(lister))
	update(t, r, p, []*apiv1.Node{old, young, other}, t0)
	if diff := cmp.Diff([]string{"copied-young"}, r.Group("copied").NotStartedNodes); diff != "" {
		t.Errorf("not started nodes of copied (-want +got):\n%s", diff)
	}
	if c := r.Group("plain").Counts; c.Ready != 1 {
		t.Errorf("plain: %+v, want its node ready (its group publishes no device)", c)
	}
	lister.list = append(lister.list, slice("copied-young", "gpu.example.com", 1, 2))
	update(t, r, p, []*apiv1.Node{old, young, other}, t0.Add(time.Second))
	if c := r.ClusterCounts(); c != (NodeCounts{Ready: 3}) {
		t.Errorf("after the slices: %+v, want 3 ready", c)
	}
}
