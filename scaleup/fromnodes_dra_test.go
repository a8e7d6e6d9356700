package scaleup

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// TestFirstLoopTemplateFromNodeCarriesSlices: a group without a provider
// template is templated from its real node; in the very first loop (the
// snapshot has never been loaded) the template must already carry the
// node's ResourceSlices, read from the informers, so that pods with claims
// scale the group up at once instead of one loop later.
func TestFirstLoopTemplateFromNodeCarriesSlices(t *testing.T) {
	ctx := context.Background()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + removalDriver + `"`}}}}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "one-gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "gpu", Count: 1, AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}}
	node := templateNode("gpu-1", "16")
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("gpu", 0, 10, 1, nil) // no provider template: copies of its nodes
	provider.AddNode("gpu", node)
	o := newDRAOrchestrator(t, provider, class, tmpl, devicesTemplateSlice("gpu-1", 4))

	pods := pendingPods(6, "1")
	for _, p := range pods {
		name := "one-gpu"
		p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &name}}
	}
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Nodes: []*apiv1.Node{node}, Pending: pods})
	if err != nil {
		t.Fatal(err)
	}
	if got := increases(res); got["gpu"] != 1 || res.FitExisting != 4 {
		reasons := map[string]string{}
		for p, r := range res.Remaining {
			reasons[p.Name] = r
		}
		t.Errorf("first loop: increases %v, fit existing %d; want gpu +1 (a copy of gpu-1 with its 4 devices) and 4; left: %v",
			got, res.FitExisting, reasons)
	}
}
