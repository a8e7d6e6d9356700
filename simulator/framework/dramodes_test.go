package framework

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// modesFixture is newDRAFixture with node gpu-1 publishing four devices and
// two more templates in every namespace of namespaces: "all-gpus" (every
// device of class gpu on the node) and "admin-gpu" (one device, admin
// access).
func modesFixture(namespaces ...string) *fakeDRA {
	src := newDRAFixture()
	src.slices = []*resourceapi.ResourceSlice{gpuSlice("gpu-1", "gpu-0", "gpu-1", "gpu-2", "gpu-3")}
	yes := true
	for _, ns := range namespaces {
		src.templates = append(src.templates,
			&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all-gpus"},
				Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
					Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
						DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeAll}}}}}}},
			&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin-gpu"},
				Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
					Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
						DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
						AdminAccess: &yes}}}}}}},
			&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-gpu"},
				Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: gpuRequests(1)}}})
	}
	return src
}

// newDRAHandleWith is newDRAHandle with objs (namespaces) in the informers.
func newDRAHandleWith(t *testing.T, src DRASource, objs []runtime.Object, nodes ...*apiv1.Node) *Handle {
	t.Helper()
	ctx := t.Context()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	h, err := New(ctx, NewSnapshot(nodes, nil), factory, WithDRA(src))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return h
}

// claimPod is a pod of namespace ns whose claim "gpu" is made from template.
func claimPod(name, ns, template string) *apiv1.Pod {
	p := makePod(name, "1").Obj()
	p.Namespace = ns
	p.UID = types.UID("uid-" + ns + "-" + name)
	p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}}
	return p
}

func allocatedDeviceNames(t *testing.T, s *Snapshot, pod *apiv1.Pod) []string {
	t.Helper()
	c, ok := s.Claim(pod.Namespace, simClaimName(pod, "gpu"))
	if !ok || c.Status.Allocation == nil {
		t.Fatalf("claim of %s: in snapshot %v, allocated %v", pod.Name, ok, ok && c.Status.Allocation != nil)
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Device)
	}
	sort.Strings(out)
	return out
}

func TestDRAAllocationModeAllTakesEveryDevice(t *testing.T) {
	ctx := context.Background()
	h := newDRAHandle(t, modesFixture("default"), makeNode("gpu-1", "16").Obj(), makeNode("plain-1", "16").Obj())
	s := h.Snapshot()
	s.Fork()
	defer s.Revert()
	first := claimPod("first", "default", "all-gpus")
	if err := h.CheckPod(ctx, first, "plain-1"); err == nil {
		t.Errorf("a pod claiming all devices fits a node without devices")
	}
	if err := s.AddPod(first, "gpu-1"); err != nil {
		t.Fatalf("first pod claiming all devices: %v", err)
	}
	if diff := cmp.Diff([]string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, allocatedDeviceNames(t, s, first)); diff != "" {
		t.Errorf("devices of the allocationMode All claim (-want +got):\n%s", diff)
	}
	if got, total := s.DeviceUsage("gpu-1"); got != 4 || total != 4 {
		t.Errorf("DeviceUsage = %d/%d, want 4/4", got, total)
	}
	for _, tmpl := range []string{"all-gpus", "one-gpu"} {
		if err := h.CheckPod(ctx, claimPod("second-"+tmpl, "default", tmpl), "gpu-1"); err == nil {
			t.Errorf("a pod claiming %s fits the node whose devices are all allocated", tmpl)
		}
	}
	// A copy of the node (as a scale-up adds) offers the second pod its own four.
	if err := s.CopyNode("gpu-1", makeNode("gpu-1-copy", "16").Obj()); err != nil {
		t.Fatal(err)
	}
	second := claimPod("second", "default", "all-gpus")
	if node, err := h.FitAnywhere(ctx, second, nil); err != nil || node != "gpu-1-copy" {
		t.Errorf("second pod claiming all devices: %q, %v; want gpu-1-copy", node, err)
	}
}

func adminNamespaces() []runtime.Object {
	return []runtime.Object{
		&apiv1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops", Labels: map[string]string{"resource.kubernetes.io/admin-access": "true"}}},
		&apiv1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev"}},
		&apiv1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
	}
}

func TestDRAAdminAccessDoesNotConsumeDevices(t *testing.T) {
	ctx := context.Background()
	for _, adminFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "admin claim first", false: "admin claim last"}[adminFirst], func(t *testing.T) {
			h := newDRAHandleWith(t, modesFixture("ops", "dev"), adminNamespaces(), makeNode("gpu-1", "16").Obj())
			s := h.Snapshot()
			s.Fork()
			defer s.Revert()
			admin := claimPod("monitor", "ops", "admin-gpu")
			var users []*apiv1.Pod
			for _, n := range []string{"a", "b", "c", "d"} {
				users = append(users, claimPod("user-"+n, "dev", "one-gpu"))
			}
			order := append([]*apiv1.Pod{admin}, users...)
			if !adminFirst {
				order = append(users, admin)
			}
			for _, p := range order {
				if err := s.AddPod(p, "gpu-1"); err != nil {
					t.Fatalf("placing %s/%s: %v", p.Namespace, p.Name, err)
				}
			}
			c, _ := s.Claim("ops", simClaimName(admin, "gpu"))
			if r := c.Status.Allocation.Devices.Results; len(r) != 1 || r[0].AdminAccess == nil || !*r[0].AdminAccess {
				t.Errorf("admin claim's allocation: %+v, want one result with adminAccess", r)
			}
			if got, total := s.DeviceUsage("gpu-1"); got != 4 || total != 4 {
				t.Errorf("DeviceUsage = %d/%d, want 4/4 (the users' devices only)", got, total)
			}
			if err := h.CheckPod(ctx, claimPod("user-e", "dev", "one-gpu"), "gpu-1"); err == nil {
				t.Errorf("a fifth one-device pod fits a node with four devices")
			}
		})
	}
}

func TestDRAAdminAccessOnlyInLabelledNamespace(t *testing.T) {
	ctx := context.Background()
	h := newDRAHandleWith(t, modesFixture("ops", "dev"), adminNamespaces(), makeNode("gpu-1", "16").Obj())
	s := h.Snapshot()
	if err := h.CheckPod(ctx, claimPod("monitor", "ops", "admin-gpu"), "gpu-1"); err != nil {
		t.Errorf("admin access in the labelled namespace: %v", err)
	}
	err := h.CheckPod(ctx, claimPod("monitor", "dev", "admin-gpu"), "gpu-1")
	var u *Unschedulable
	if !errors.As(err, &u) || u.Plugin != dynamicResourcesPlugin || !strings.Contains(err.Error(), "resource.kubernetes.io/admin-access") {
		t.Errorf("admin access in an unlabelled namespace: %v; want refused by %s naming the label", err, dynamicResourcesPlugin)
	}
	s.Fork()
	defer s.Revert()
	if err := s.AddPod(claimPod("monitor", "dev", "admin-gpu"), "gpu-1"); err == nil {
		t.Errorf("admin-access pod of an unlabelled namespace placed")
	}
	if err := s.AddPod(claimPod("monitor", "ops", "admin-gpu"), "gpu-1"); err != nil {
		t.Errorf("admin-access pod of the labelled namespace: %v", err)
	}
	if got, total := s.DeviceUsage("gpu-1"); got != 0 || total != 4 {
		t.Errorf("DeviceUsage = %d/%d with an admin-access claim only, want 0/4", got, total)
	}
}
