package framework

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

const testDriver = "gpu.example.com"

// fakeDRA is a DRASource over fixed objects (the listers' role).
type fakeDRA struct {
	slices    []*resourceapi.ResourceSlice
	claims    []*resourceapi.ResourceClaim
	classes   []*resourceapi.DeviceClass
	templates []*resourceapi.ResourceClaimTemplate
}

func (f *fakeDRA) ResourceSlices() ([]*resourceapi.ResourceSlice, error) { return f.slices, nil }
func (f *fakeDRA) ResourceClaims() ([]*resourceapi.ResourceClaim, error) { return f.claims, nil }
func (f *fakeDRA) DeviceClasses() ([]*resourceapi.DeviceClass, error)    { return f.classes, nil }
func (f *fakeDRA) ResourceClaimTemplate(ns, name string) (*resourceapi.ResourceClaimTemplate, error) {
	for _, t := range f.templates {
		if t.Namespace == ns && t.Name == name {
			return t, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaimtemplates"), name)
}

func gpuSlice(node string, devices ...string) *resourceapi.ResourceSlice {
	sl := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"},
		Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: &node,
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	for _, d := range devices {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: d})
	}
	return sl
}

func gpuRequests(count int64) resourceapi.DeviceClaim {
	return resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: count,
			AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}
}

func newDRAFixture() *fakeDRA {
	return &fakeDRA{
		slices: []*resourceapi.ResourceSlice{gpuSlice("gpu-1", "gpu-0")},
		classes: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + testDriver + `"`}}}}}},
		templates: []*resourceapi.ResourceClaimTemplate{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "one-gpu"},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: gpuRequests(1)}}}},
	}
}

func newDRAHandle(t *testing.T, src DRASource, nodes ...*apiv1.Node) *Handle {
	t.Helper()
	ctx := t.Context()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	h, err := New(ctx, NewSnapshot(nodes, nil), factory, WithDRA(src))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return h
}

func templatePod(name string) *apiv1.Pod {
	p := makePod(name, "1").Obj()
	tmpl := "one-gpu"
	p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	return p
}

func TestDRAClaimTemplateFitsOnlyNodesWithDevices(t *testing.T) {
	ctx := context.Background()
	h := newDRAHandle(t, newDRAFixture(), makeNode("plain-1", "4").Obj(), makeNode("gpu-1", "4").Obj())
	tests := []struct {
		node    string
		wantFit bool
	}{{"plain-1", false}, {"gpu-1", true}}
	for _, tc := range tests {
		err := h.CheckPod(ctx, templatePod("p"), tc.node)
		if got := err == nil; got != tc.wantFit {
			t.Errorf("pod with a claim template on %s: fits=%v (%v), want %v", tc.node, got, err, tc.wantFit)
		}
	}
	if node, err := h.FitAnywhere(ctx, templatePod("p"), nil); err != nil || node != "gpu-1" {
		t.Errorf("FitAnywhere = %q, %v; want gpu-1", node, err)
	}
}

func TestDRAAllocationForkRevert(t *testing.T) {
	ctx := context.Background()
	h := newDRAHandle(t, newDRAFixture(), makeNode("gpu-1", "4").Obj())
	s := h.Snapshot()
	p1, p2 := templatePod("p1"), templatePod("p2")

	s.Fork()
	if err := h.CheckPod(ctx, p1, "gpu-1"); err != nil {
		t.Fatalf("first pod: %v", err)
	}
	if err := s.AddPod(p1, "gpu-1"); err != nil {
		t.Fatalf("placing the first pod: %v", err)
	}
	claim, ok := s.Claim("default", simClaimName(p1, "gpu"))
	if !ok || claim.Status.Allocation == nil {
		t.Fatalf("claim of the placed pod: %v, allocated %v", ok, ok && claim.Status.Allocation != nil)
	}
	var got []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		got = append(got, r.Driver+"/"+r.Pool+"/"+r.Device)
	}
	if diff := cmp.Diff([]string{testDriver + "/gpu-1/gpu-0"}, got); diff != "" {
		t.Errorf("allocated devices (-want +got):\n%s", diff)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != p1.UID {
		t.Errorf("claim reserved for %v, want the first pod", claim.Status.ReservedFor)
	}
	if err := h.CheckPod(ctx, p2, "gpu-1"); err == nil {
		t.Errorf("second pod fits the node whose only device is allocated")
	}
	if err := s.AddPod(p2, "gpu-1"); err == nil {
		t.Errorf("second pod placed on the node whose only device is allocated")
	}
	s.Revert()

	if _, ok := s.Claim("default", simClaimName(p1, "gpu")); ok {
		t.Errorf("claim created in a reverted level is still there")
	}
	if err := h.CheckPod(ctx, p2, "gpu-1"); err != nil {
		t.Errorf("after Revert the device is free again: %v", err)
	}
}

func TestDRACopyNodeCarriesRenamedSlices(t *testing.T) {
	ctx := context.Background()
	h := newDRAHandle(t, newDRAFixture(), makeNode("gpu-1", "4").Obj())
	s := h.Snapshot()
	s.Fork()
	defer s.Revert()
	if err := s.AddPod(templatePod("p1"), "gpu-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyNode("gpu-1", makeNode("twin-1", "4").Obj()); err != nil {
		t.Fatal(err)
	}
	sl := s.ResourceSlices("twin-1")
	if len(sl) != 1 || *sl[0].Spec.NodeName != "twin-1" || sl[0].Spec.Pool.Name != "twin-1" {
		t.Fatalf("twin's slices: %+v", sl)
	}
	if node, err := h.FitAnywhere(ctx, templatePod("p2"), nil); err != nil || node != "twin-1" {
		t.Errorf("second pod: %q, %v; want twin-1 (its own device)", node, err)
	}
}

func TestDRASharedClaimFollowsItsAllocation(t *testing.T) {
	ctx := context.Background()
	src := newDRAFixture()
	src.slices = append(src.slices, gpuSlice("gpu-2", "gpu-0"))
	src.claims = []*resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shared"},
		Spec: resourceapi.ResourceClaimSpec{Devices: gpuRequests(1)}}}
	h := newDRAHandle(t, src, makeNode("gpu-1", "4").Obj(), makeNode("gpu-2", "4").Obj())
	s := h.Snapshot()
	shared := func(name string) *apiv1.Pod {
		p := makePod(name, "1").Obj()
		claim := "shared"
		p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
		return p
	}
	s.Fork()
	defer s.Revert()
	if err := s.AddPod(shared("a"), "gpu-2"); err != nil {
		t.Fatal(err)
	}
	if err := h.CheckPod(ctx, shared("b"), "gpu-1"); err == nil {
		t.Errorf("second pod of a claim allocated on gpu-2 fits gpu-1")
	}
	if err := s.AddPod(shared("b"), "gpu-2"); err != nil {
		t.Errorf("second pod of the shared claim on its node: %v", err)
	}
	c, _ := s.Claim("default", "shared")
	if len(c.Status.ReservedFor) != 2 {
		t.Errorf("shared claim reserved for %d pods, want 2", len(c.Status.ReservedFor))
	}
	// The informer's object is never modified.
	if src.claims[0].Status.Allocation != nil || len(src.claims[0].Status.ReservedFor) != 0 {
		t.Errorf("the cluster's claim was modified")
	}
}

func TestDRAWithoutSourceRefusesTemplateClaims(t *testing.T) {
	h := newHandle(t, NewSnapshot([]*apiv1.Node{makeNode("n1", "4").Obj()}, nil))
	err := h.CheckPod(context.Background(), templatePod("p"), "n1")
	var u *Unschedulable
	if !errors.As(err, &u) || u.Plugin != dynamicResourcesPlugin {
		t.Errorf("pod with a claim template and no DRA source: %v", err)
	}
}

func TestDRAResetReloadsAndDropsSimulatedState(t *testing.T) {
	h := newDRAHandle(t, newDRAFixture(), makeNode("gpu-1", "4").Obj())
	s := h.Snapshot()
	if err := s.AddPod(templatePod("p1"), "gpu-1"); err != nil {
		t.Fatal(err)
	}
	s.Reset([]*apiv1.Node{makeNode("gpu-1", "4").Obj()}, nil)
	if _, ok := s.Claim("default", simClaimName(templatePod("p1"), "gpu")); ok {
		t.Errorf("simulated claim survived Reset")
	}
	if err := h.CheckPod(context.Background(), templatePod("p2"), "gpu-1"); err != nil {
		t.Errorf("after Reset: %v", err)
	}
}
