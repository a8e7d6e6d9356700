package scaleup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// devicesTemplateSlice is a template node's slice of n devices of removalDriver.
func devicesTemplateSlice(node string, n int) *resourceapi.ResourceSlice {
	sl := oneDeviceSlice(node)
	sl.Spec.Devices = nil
	for i := 0; i < n; i++ {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return sl
}

// TestNotTriggerScaleUpNamesTheDeviceClass: a pod whose claim template asks
// for 8 devices of class gpu.example.com on one node, when no group's nodes
// publish 8, is told so in those words; when another group refuses it for
// another reason, each reason is counted, the devices one included.
func TestNotTriggerScaleUpNamesTheDeviceClass(t *testing.T) {
	ctx := context.Background()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: removalDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + removalDriver + `"`}}}}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "eight"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: removalDriver, Count: 8, AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}}
	for _, tc := range []struct {
		name    string
		full    bool // a second group at its max size
		wantPod string
	}{
		{name: "every group lacks the devices",
			wantPod: "no node group offers 8 devices of class gpu.example.com on one node"},
		{name: "another group full", full: true,
			wantPod: "1 max node group size reached, 2 no node with 8 devices of class gpu.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("four", 0, 10, 0, templateNode("four", "16")).
				SetTemplateResourceSlices([]*resourceapi.ResourceSlice{devicesTemplateSlice("four", 4)})
			provider.AddNodeGroup("two", 0, 10, 0, templateNode("two", "16")).
				SetTemplateResourceSlices([]*resourceapi.ResourceSlice{devicesTemplateSlice("two", 2)})
			if tc.full {
				provider.AddNodeGroup("full", 0, 0, 0, templateNode("full", "16"))
			}
			o := newDRAOrchestrator(t, provider, []runtime.Object{class, tmpl}...)
			p := pendingPods(1, "1")[0]
			name := "eight"
			p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &name}}
			res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: []*apiv1.Pod{p}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Increases) != 0 {
				t.Errorf("increases %v, want none", res.Increases)
			}
			if got := res.Remaining[p]; got != tc.wantPod {
				t.Errorf("reason %q, want %q", got, tc.wantPod)
			}
		})
	}
}

func TestDemandsString(t *testing.T) {
	for _, tc := range []struct {
		demands []framework.DeviceDemand
		want    string
	}{
		{[]framework.DeviceDemand{{Class: "a", Count: 8}}, "8 devices of class a"},
		{[]framework.DeviceDemand{{Class: "a", Count: 1}, {Class: "b", All: true}}, "1 device of class a and all devices of class b"},
	} {
		if got := framework.DemandsString(tc.demands); got != tc.want {
			t.Errorf("DemandsString(%v) = %q, want %q", tc.demands, got, tc.want)
		}
	}
}

// TestAdminAccessClaimScaleUp: a pod whose claim asks for admin access
// scales a device group up in a namespace labelled for it, and elsewhere
// triggers nothing and is told why in the simulation's words (about the
// namespace, not about devices the group would lack).
func TestAdminAccessClaimScaleUp(t *testing.T) {
	ctx := context.Background()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: removalDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + removalDriver + `"`}}}}}
	yes := true
	var objs []runtime.Object
	for ns, labels := range map[string]map[string]string{"ops": {framework.AdminAccessNamespaceLabel: "true"}, "dev": nil} {
		objs = append(objs, &apiv1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}},
			&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin"},
				Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
					Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
						DeviceClassName: removalDriver, Count: 1, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
						AdminAccess: &yes}}}}}}})
	}
	for _, tc := range []struct {
		ns         string
		wantNodes  int
		wantReason string
	}{
		{ns: "ops", wantNodes: 1},
		{ns: "dev", wantReason: "namespace dev lacks the label resource.kubernetes.io/admin-access=true"},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("four", 0, 10, 0, templateNode("four", "16")).
				SetTemplateResourceSlices([]*resourceapi.ResourceSlice{devicesTemplateSlice("four", 4)})
			o := newDRAOrchestrator(t, provider, append([]runtime.Object{class}, objs...)...)
			p := pendingPods(1, "1")[0]
			p.Namespace = tc.ns
			name := "admin"
			p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &name}}
			res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: []*apiv1.Pod{p}})
			if err != nil {
				t.Fatal(err)
			}
			if got := increases(res)["four"]; got != tc.wantNodes {
				t.Errorf("increase %d, want %d", got, tc.wantNodes)
			}
			if got := res.Remaining[p]; !strings.Contains(got, tc.wantReason) || (tc.wantReason == "") != (got == "") {
				t.Errorf("reason %q, want one containing %q", got, tc.wantReason)
			}
		})
	}
}
