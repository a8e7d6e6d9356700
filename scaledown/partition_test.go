package scaledown

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

const migDriver = "gpu.example.com"

// migSource is a DRA source of fixed objects: each node of slices publishes
// one partitionable GPU (counter set gpu-0: 7 slices, 40Gi; the whole GPU
// and seven 1g devices consume it), and claims hold allocated[node] of the
// node's 1g devices.
type migSource struct {
	slices []*resourceapi.ResourceSlice
	claims []*resourceapi.ResourceClaim
}

func newMIGSource(allocated map[string]int) *migSource {
	s := &migSource{}
	one := func(slices int64, mem string) []resourceapi.DeviceCounterConsumption {
		return []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourceapi.Counter{
			"slices": {Value: *resource.NewQuantity(slices, resource.DecimalSI)}, "memory": {Value: resource.MustParse(mem)}}}}
	}
	for node, n := range allocated {
		pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}
		devices := []resourceapi.Device{{Name: "gpu-0", ConsumesCounters: one(7, "40Gi")}}
		for i := 0; i < 7; i++ {
			devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("gpu-0-1g-%d", i), ConsumesCounters: one(1, "5Gi")})
		}
		s.slices = append(s.slices,
			&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"},
				Spec: resourceapi.ResourceSliceSpec{Driver: migDriver, NodeName: &node, Pool: pool,
					SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: map[string]resourceapi.Counter{
						"slices": {Value: resource.MustParse("7")}, "memory": {Value: resource.MustParse("40Gi")}}}}}},
			&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-devices"},
				Spec: resourceapi.ResourceSliceSpec{Driver: migDriver, NodeName: &node, Pool: pool, Devices: devices}})
		for i := 0; i < n; i++ {
			c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", node, i)}}
			c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "slice", Driver: migDriver, Pool: node,
					Device: fmt.Sprintf("gpu-0-1g-%d", i)}}}}
			s.claims = append(s.claims, c)
		}
	}
	return s
}

func (s *migSource) ResourceSlices() ([]*resourceapi.ResourceSlice, error) { return s.slices, nil }
func (s *migSource) ResourceClaims() ([]*resourceapi.ResourceClaim, error) { return s.claims, nil }
func (s *migSource) DeviceClasses() ([]*resourceapi.DeviceClass, error)    { return nil, nil }
func (s *migSource) ResourceClaimTemplate(_, name string) (*resourceapi.ResourceClaimTemplate, error) {
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaimtemplates"), name)
}

// simSession is the fake session holding a real simulator, as the loop's
// *scaleup.Session does.
type simSession struct {
	*session
	sim *framework.Handle
}

func (s *simSession) Simulator() *framework.Handle { return s.sim }

// TestPlannerCountsPartitionedGPUsBySlicesInUse: a node whose GPU is cut
// into 7 slices is as used as the share of its slices allocated, not as
// the share of its 8 devices (whole GPU and 7 slices) allocated.
func TestPlannerCountsPartitionedGPUsBySlicesInUse(t *testing.T) {
	// Every node runs one pod of 1 cpu (of 4): 0.25 by cpu.
	allocated := map[string]int{"mig-idle": 0, "mig-one": 1, "mig-three": 3, "mig-full": 7}
	nodes := map[string]string{}
	for n := range allocated {
		nodes[n] = "1"
	}
	f := newFixture(t, 0, nodes, func(o *fixtureOptions) { o.NodeGroupDefaults.ScaleDownGPUUtilizationThreshold = 0.4 })
	ctx := t.Context()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	h, err := framework.New(ctx, framework.NewSnapshot(f.nodes, f.pods), factory, framework.WithDRA(newMIGSource(allocated)))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	sess := &simSession{session: f.sess, sim: h}

	plan := f.planWith(t, t0, func(in *Input) { in.Session = sess })
	wantReasons := map[string]string{
		"mig-idle":  ReasonNotUnneededLongEnough,
		"mig-one":   ReasonNotUnneededLongEnough, // 1/7 of its slices (not 1 of 8 devices)
		"mig-three": ReasonNotUnderutilized,      // 3/7 >= 0.4 (3 of 8 devices would be 0.375)
		"mig-full":  ReasonNotUnderutilized,      // 7/7 (7 of 8 devices would be 0.875)
	}
	gotReasons := map[string]string{}
	for n := range wantReasons {
		gotReasons[n] = plan.Unremovable[n]
	}
	if diff := cmp.Diff(wantReasons, gotReasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	gotUtil := map[string]float64{}
	for _, c := range plan.Unneeded {
		gotUtil[c.Node.Name] = c.Utilization
	}
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
	if diff := cmp.Diff(map[string]float64{"mig-idle": 0, "mig-one": 1.0 / 7}, gotUtil, approx); diff != "" {
		t.Errorf("utilisation of the unneeded nodes (-want +got):\n%s", diff)
	}
}
