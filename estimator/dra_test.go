package estimator

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

const draDriver = "gpu.example.com"

// newDRASim builds the simulator with a DeviceClass "gpu" (every device of
// draDriver) and a ResourceClaimTemplate "one-gpu" (one such device) in
// its DRA informers, and "all-gpus" (every such device of the node), wired as cluster-autoscaler/scaleup.go does.
func newDRASim(t *testing.T) *framework.Handle {
	t.Helper()
	ctx := context.Background()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + draDriver + `"`}}}}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "one-gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}}
	all := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "all-gpus"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeAll}}}}}}}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(class, tmpl, all), 0)
	h, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory, framework.WithDRA(framework.NewInformerDRASource(factory)))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	h.Snapshot().Reset(nil, nil) // as each loop does: the DRA objects are read again
	return h
}

func withGPUClaim(p *apiv1.Pod) {
	tmpl := "one-gpu"
	p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
}

func withAllGPUsClaim(p *apiv1.Pod) {
	tmpl := "all-gpus"
	p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
}

func TestEstimateCountsDevices(t *testing.T) {
	for _, tc := range []struct {
		name                            string
		devicesPerNode                  int
		claim                           func(*apiv1.Pod)
		nodes, scheduled, unschedulable int
	}{
		{name: "two devices per node", devicesPerNode: 2, claim: withGPUClaim, nodes: 3, scheduled: 5},
		{name: "no devices", devicesPerNode: 0, claim: withGPUClaim, unschedulable: 5},
		{name: "allocationMode All: one pod per node", devicesPerNode: 4, claim: withAllGPUsClaim, nodes: 5, scheduled: 5},
		{name: "allocationMode All without devices", devicesPerNode: 0, claim: withAllGPUsClaim, unschedulable: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newDRASim(t)
			info := templateInfo("16")
			if tc.devicesPerNode > 0 {
				name := info.Node.Name
				sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu"},
					Spec: resourceapi.ResourceSliceSpec{Driver: draDriver, NodeName: &name,
						Pool: resourceapi.ResourcePool{Name: name, ResourceSliceCount: 1}}}
				for i := 0; i < tc.devicesPerNode; i++ {
					sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: "gpu-" + string(rune('a'+i))})
				}
				info.ResourceSlices = []*resourceapi.ResourceSlice{sl}
			}
			est, err := New(sim).Estimate(context.Background(), GroupPods(pods("train", 5, "1", tc.claim)), info, "ng",
				Limits{MaxNodes: 100})
			if err != nil {
				t.Fatal(err)
			}
			if est.NodeCount != tc.nodes || len(est.Scheduled) != tc.scheduled || len(est.Unschedulable) != tc.unschedulable {
				t.Errorf("nodes %d scheduled %d unschedulable %d; want %d %d %d", est.NodeCount, len(est.Scheduled),
					len(est.Unschedulable), tc.nodes, tc.scheduled, tc.unschedulable)
			}
			if sim.Snapshot().Len() != 0 || sim.Snapshot().Forked() {
				t.Errorf("the estimate left %d nodes in the snapshot (forked %v)", sim.Snapshot().Len(), sim.Snapshot().Forked())
			}
		})
	}
}
