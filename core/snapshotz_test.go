package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// TestSnapshotRecordsTheCloud: a /snapshotz snapshot carries each group's
// sizes, instances (with their errors), the provider's failures, each
// node's group and the limits, and the objects of its source; what the
// upstream fields say is unchanged.
func TestSnapshotRecordsTheCloud(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	tmpl := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tmpl-a", Labels: map[string]string{"pool": "a"}}}
	p.AddNodeGroup("a", 1, 5, 3, tmpl)
	p.AddNodeGroup("b", 0, 2, 0, nil)
	n1 := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	p.AddNode("a", n1)
	p.SetInstanceStatus("a", n1.Spec.ProviderID, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
		ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT"}})
	p.InjectError("TargetSize", "b", errors.New("cloud down"))
	p.SetResourceLimiter(cloudprovider.NewResourceLimiter(map[string]int64{"cpu": 1}, map[string]int64{"cpu": 100}))
	groups, _ := p.NodeGroups(ctx)
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	a := NewAutoscaler(Options{}, Listers{}, p, metrics.New(prometheus.NewRegistry()),
		WithPassiveClock(testclock.NewFakePassiveClock(now)),
		WithSnapshotObjects(func() (*SnapshotObjects, error) { return &SnapshotObjects{}, nil }))
	obs := &Observation{Now: now, NodeGroups: groups, Nodes: []*apiv1.Node{n1}}
	snap := a.snapshot(ctx, obs, now)
	want := SnapshotCloud{
		CloudProvider: "fake",
		NodeGroups: []*SnapshotNodeGroup{
			{Id: "a", MinSize: 1, MaxSize: 5, TargetSize: 3, Debug: "a (min 1, max 5)", Exist: true,
				Instances: []SnapshotInstance{{Id: "fake://n1", State: cloudprovider.InstanceCreating,
					ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT"}}},
			{Id: "b", MaxSize: 2, Debug: "b (min 0, max 2)", Exist: true, Instances: []SnapshotInstance{},
				Errors: map[string]string{"TargetSize": "cloud down"}},
		},
		NodeGroupOfNode: map[string]string{"n1": "a"},
		ResourceLimits:  &SnapshotResourceLimits{Min: map[string]int64{"cpu": 1}, Max: map[string]int64{"cpu": 100}},
		GPULabel:        "fake.gpu/type",
		GPUConfigs:      map[string]*cloudprovider.GpuConfig{},
	}
	if diff := cmp.Diff(want, snap.SnapshotCloud); diff != "" {
		t.Errorf("cloud of the snapshot (-want +got):\n%s", diff)
	}
	p.SetPricing(linearPricing{})
	snap = a.snapshot(ctx, obs, now)
	if diff := cmp.Diff(map[string]float64{"a": 2}, snap.NodePrices); diff != "" {
		t.Errorf("node prices (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&SnapshotPodPrices{Base: 0.5, PerCore: 1, PerGiB: 0.25}, snap.PodPrices); diff != "" {
		t.Errorf("pod prices (-want +got):\n%s", diff)
	}
	if snap.TemplateNodes["a"] == nil || snap.TemplateNodes["a"].Node.Name != "tmpl-a" || snap.Objects == nil ||
		len(snap.NodeList) != 1 || !snap.EndTimestamp.Equal(now) {
		t.Errorf("snapshot %+v, want a's template, the node, the objects", snap)
	}
}

// linearPricing: a node costs 2 an hour, a pod 0.5 + 1 per core + 0.25
// per GiB.
type linearPricing struct{}

func (linearPricing) NodePrice(_ context.Context, _ *apiv1.Node, start, end time.Time) (float64, error) {
	return 2 * end.Sub(start).Hours(), nil
}

func (linearPricing) PodPrice(_ context.Context, pod *apiv1.Pod, start, end time.Time) (float64, error) {
	r := pod.Spec.Containers[0].Resources.Requests
	return (0.5 + r.Cpu().AsApproximateFloat64() + r.Memory().AsApproximateFloat64()/(1<<30)*0.25) * end.Sub(start).Hours(), nil
}

// TestSnapshotCarriesTemplateSlices: a group's template node is dumped
// with the ResourceSlices its new nodes would publish.
func TestSnapshotCarriesTemplateSlices(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	tmpl := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tmpl-gpu"}}
	node := "tmpl-gpu"
	slices := []*resourceapi.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "tmpl-gpu-slice"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: &node,
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, Devices: []resourceapi.Device{{Name: "gpu-0"}}}}}
	p.AddNodeGroup("gpu", 0, 5, 0, tmpl).SetTemplateResourceSlices(slices)
	groups, _ := p.NodeGroups(ctx)
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	a := NewAutoscaler(Options{}, Listers{}, p, metrics.New(prometheus.NewRegistry()),
		WithPassiveClock(testclock.NewFakePassiveClock(now)))
	snap := a.snapshot(ctx, &Observation{Now: now, NodeGroups: groups}, now)
	tn := snap.TemplateNodes["gpu"]
	if tn == nil {
		t.Fatal("no template node for gpu")
	}
	if diff := cmp.Diff(slices, tn.ResourceSlices); diff != "" {
		t.Errorf("template slices (-want +got):\n%s", diff)
	}
}
