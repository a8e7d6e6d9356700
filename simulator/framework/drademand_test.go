package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeviceDemands: a pod's device demand per class, from its claim
// templates (before any claim exists), from a shared claim the snapshot
// holds, summed per class, with allocationMode All and firstAvailable.
func TestDeviceDemands(t *testing.T) {
	src := newDRAFixture()
	src.templates = append(src.templates, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mixed"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{
				{Name: "a", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 2,
					AllocationMode: resourceapi.DeviceAllocationModeExactCount}},
				{Name: "b", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic",
					AllocationMode: resourceapi.DeviceAllocationModeAll}},
				{Name: "c", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "big", DeviceClassName: "gpu", Count: 3,
					AllocationMode: resourceapi.DeviceAllocationModeExactCount}}},
			}}}}})
	src.claims = append(src.claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shared"},
		Spec: resourceapi.ResourceClaimSpec{Devices: gpuRequests(4)}})
	h := newDRAHandle(t, src)
	snap := h.Snapshot()
	snap.Reset(nil, nil)
	withClaims := func(claims ...apiv1.PodResourceClaim) *apiv1.Pod {
		p := makePod("p", "1").Obj()
		p.Spec.ResourceClaims = claims
		return p
	}
	tmpl := func(name string) *string { return &name }
	for _, tc := range []struct {
		name string
		pod  *apiv1.Pod
		want []DeviceDemand
	}{
		{name: "no claims", pod: makePod("p", "1").Obj(), want: []DeviceDemand{}},
		{name: "one template", pod: templatePod("p"), want: []DeviceDemand{{Class: "gpu", Count: 1}}},
		{name: "a template and a shared claim, summed per class",
			pod: withClaims(apiv1.PodResourceClaim{Name: "x", ResourceClaimTemplateName: tmpl("mixed")},
				apiv1.PodResourceClaim{Name: "y", ResourceClaimName: tmpl("shared")}),
			want: []DeviceDemand{{Class: "gpu", Count: 9}, {Class: "nic", Count: 1, All: true}}},
		{name: "a claim that does not exist is left out",
			pod: withClaims(apiv1.PodResourceClaim{Name: "y", ResourceClaimName: tmpl("gone")}), want: []DeviceDemand{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, snap.DeviceDemands(tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got := DemandsString([]DeviceDemand{{Class: "gpu", Count: 9}, {Class: "nic", Count: 1, All: true}}); got != "9 devices of class gpu and all devices of class nic" {
		t.Errorf("DemandsString = %q", got)
	}
}
