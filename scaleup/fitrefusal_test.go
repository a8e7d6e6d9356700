package scaleup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
)

// devicesObjects are a DeviceClass of removalDriver's devices and a
// ResourceClaimTemplate "devices" asking for count of them on one node.
func devicesObjects(count int64) []runtime.Object {
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: removalDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + removalDriver + `"`}}}}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "devices"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: removalDriver, Count: count, AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}}
	return []runtime.Object{class, tmpl}
}

// withDevicesClaim gives each pod a claim made from the template "devices".
func withDevicesClaim(pods []*apiv1.Pod) []*apiv1.Pod {
	name := "devices"
	for _, p := range pods {
		p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &name}}
	}
	return pods
}

// TestFitAllNamesTheRefusal: a check of a request's pods against the
// current nodes that fails says why the first pod left fits no node, with
// the explainer off: for want of devices in the words of the
// NotTriggerScaleUp event, otherwise the first node group's refusal with
// its nodes and numbers.
func TestFitAllNamesTheRefusal(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		devices int64 // the pods' claim, 0 for none
		cpu     string
		count   int
		fits    bool
		want    string
	}{
		{name: "fits", cpu: "1", count: 2, fits: true},
		{name: "no node offers the devices", devices: 8, cpu: "1", count: 1,
			want: "no node offers 8 devices of class gpu.example.com"},
		{name: "the devices of one node taken by the others", devices: 2, cpu: "1", count: 3,
			want: "no node offers 2 devices of class gpu.example.com"},
		{name: "too big", cpu: "5", count: 1,
			want: "node group booked: Insufficient cpu (2 node(s): booked-0, booked-1; the pod requests 5 cpu, the most free on these nodes is 4)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider, nodes := bookingCluster(2, "4")
			objs := devicesObjects(tc.devices)
			for _, n := range nodes {
				objs = append(objs, devicesTemplateSlice(n.Name, 2))
			}
			o := newDRAOrchestrator(t, provider, objs...)
			if err := o.state.Update(ctx, provider, nodes, now); err != nil {
				t.Fatal(err)
			}
			s := o.Begin(ctx, Input{Now: now, Nodes: nodes})
			pods := requestPods(tc.count, tc.cpu, "1Gi")
			if tc.devices > 0 {
				pods = withDevicesClaim(pods)
			}
			fit, refusal := s.FitAll(ctx, [][]*apiv1.Pod{pods}, true)
			if fit != tc.fits || refusal != tc.want {
				t.Errorf("FitAll = %v, %q; want %v, %q", fit, refusal, tc.fits, tc.want)
			}
		})
	}
}

// TestScaleUpAllNamesTheDeviceClass: an all-or-nothing request whose pods
// claim 8 devices on one node, which no group's new node offers, is told
// so in the NotTriggerScaleUp event's words; when another group refuses
// for another reason, each group's note names its refusal.
func TestScaleUpAllNamesTheDeviceClass(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		small bool // a group whose node is too small for the pod's CPU
		want  string
	}{
		{name: "every group lacks the devices",
			want: "none of the 1 pods fit: no node group offers 8 devices of class gpu.example.com on one node"},
		{name: "another group too small", small: true,
			want: "none of the 1 pods fit: group four: a new node of it does not offer 8 devices of class gpu.example.com; " +
				"group small: the pods do not fit on a new node of it (Insufficient cpu); " +
				"group two: a new node of it does not offer 8 devices of class gpu.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("four", 0, 10, 0, templateNode("four", "16")).
				SetTemplateResourceSlices([]*resourceapi.ResourceSlice{devicesTemplateSlice("four", 4)})
			provider.AddNodeGroup("two", 0, 10, 0, templateNode("two", "16")).
				SetTemplateResourceSlices([]*resourceapi.ResourceSlice{devicesTemplateSlice("two", 2)})
			if tc.small {
				provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "1")).
					SetTemplateResourceSlices([]*resourceapi.ResourceSlice{devicesTemplateSlice("small", 8)})
			}
			o := newDRAOrchestrator(t, provider, devicesObjects(8)...)
			now := time.Now()
			if err := o.state.Update(ctx, provider, nil, now); err != nil {
				t.Fatal(err)
			}
			s := o.Begin(ctx, Input{Now: now})
			res := s.ScaleUpAll(ctx, withDevicesClaim(pendingPods(1, "2")), nil)
			if res.Fit || len(res.Increases) != 0 {
				t.Fatalf("fit %v, increases %v; want neither", res.Fit, res.Increases)
			}
			if res.Reason != tc.want || !res.Permanent {
				t.Errorf("reason %q (permanent %v), want %q (permanent)", res.Reason, res.Permanent, tc.want)
			}
		})
	}
}

func TestFirstRefusal(t *testing.T) {
	devices := explain.NodeGroupVerdict{NodeGroup: "a", Plugin: "DynamicResources",
		Reason: "no node with 8 devices of class x", Detail: "1 node(s): a-0"}
	cpu := explain.NodeGroupVerdict{NodeGroup: "b", Plugin: "NodeResourcesFit", Reason: "Insufficient cpu",
		Detail: "2 node(s): b-0, b-1"}
	taint := explain.NodeGroupVerdict{NodeGroup: "a", Plugin: "TaintToleration", Reason: "untolerated taint"}
	long := cpu
	long.Detail = strings.Repeat("n", 400)
	for _, tc := range []struct {
		name    string
		refused []explain.NodeGroupVerdict
		want    string
	}{
		{name: "none"},
		{name: "devices everywhere", refused: []explain.NodeGroupVerdict{devices, {NodeGroup: "b", Reason: devices.Reason}},
			want: "no node offers 8 devices of class x"},
		{name: "the first group by name", refused: []explain.NodeGroupVerdict{cpu, devices},
			want: "node group a: no node with 8 devices of class x (1 node(s): a-0); 1 more refusal"},
		{name: "then by reason", refused: []explain.NodeGroupVerdict{devices, cpu, taint},
			want: "node group a: no node with 8 devices of class x (1 node(s): a-0); 2 more refusals"},
		{name: "before any node", refused: []explain.NodeGroupVerdict{{NodeGroup: everyNode, Reason: "claim template default/x not found"}},
			want: "claim template default/x not found"},
		{name: "bounded", refused: []explain.NodeGroupVerdict{long},
			want: "node group b: Insufficient cpu (" + strings.Repeat("n", maxRefusalText-len("node group b: Insufficient cpu (...")) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := firstRefusal(tc.refused)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("firstRefusal (-want +got):\n%s", diff)
			}
			if len(got) > maxRefusalText {
				t.Errorf("%d bytes, more than %d", len(got), maxRefusalText)
			}
		})
	}
}

// TestNoRoomIsBounded: however many node groups refuse, the sentence names
// maxNotes of them and counts the others.
func TestNoRoomIsBounded(t *testing.T) {
	var notes []string
	for i := 0; i < maxNotes+5; i++ {
		notes = append(notes, fmt.Sprintf("group g%02d is at its max size of 1 nodes", i))
	}
	got := noRoom(3, 3, notes)
	want := "none of the 3 pods fit: " + strings.Join(notes[:maxNotes], "; ") + "; and 5 more node groups"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("noRoom (-want +got):\n%s", diff)
	}
}
