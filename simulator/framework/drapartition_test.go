package framework

import (
	"context"
	"fmt"
	"math"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// migSlices are the two slices of node's pool (counter sets and devices
// may not share a slice) of one partitionable GPU, MIG-like: counter set
// "gpu-0" holds 40Gi of memory and 7 compute slices; device gpu-0 is the
// whole GPU (all of both), and there are seven 1g (5Gi, 1 slice), three 2g
// (10Gi, 2) and two 3g (20Gi, 3) partitions, 13 devices in all.
func migSlices(node string) []*resourceapi.ResourceSlice {
	pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}
	counters := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"},
		Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: &node, Pool: pool,
			SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: map[string]resourceapi.Counter{
				"memory": {Value: resource.MustParse("40Gi")}, "slices": {Value: resource.MustParse("7")}}}}}}
	devices := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-devices"},
		Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: &node, Pool: pool}}
	add := func(name, profile, memory string, slices int) {
		devices.Spec.Devices = append(devices.Spec.Devices, resourceapi.Device{Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"profile": {StringValue: &profile}},
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourceapi.Counter{
				"memory": {Value: resource.MustParse(memory)}, "slices": {Value: *resource.NewQuantity(int64(slices), resource.DecimalSI)}}}}})
	}
	add("gpu-0", "whole", "40Gi", 7)
	for i := 0; i < 7; i++ {
		add(fmt.Sprintf("gpu-0-1g-%d", i), "1g.5gb", "5Gi", 1)
	}
	for i := 0; i < 3; i++ {
		add(fmt.Sprintf("gpu-0-2g-%d", i), "2g.10gb", "10Gi", 2)
	}
	for i := 0; i < 2; i++ {
		add(fmt.Sprintf("gpu-0-3g-%d", i), "3g.20gb", "20Gi", 3)
	}
	return []*resourceapi.ResourceSlice{counters, devices}
}

// migFixture is newDRAFixture whose nodes publish migSlices, with a
// template per profile ("1g.5gb", "whole", ...) asking for one device of
// class gpu with that profile attribute.
func migFixture(nodes ...string) *fakeDRA {
	src := newDRAFixture()
	src.slices = nil
	for _, n := range nodes {
		src.slices = append(src.slices, migSlices(n)...)
	}
	src.templates = nil
	for _, profile := range []string{"1g.5gb", "2g.10gb", "3g.20gb", "whole"} {
		claim := gpuRequests(1)
		claim.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes["%s"].profile == "%s"`, testDriver, profile)}}}
		src.templates = append(src.templates, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: profile},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: claim}}})
	}
	return src
}

func wantShare(t *testing.T, s *Snapshot, node string, want float64) {
	t.Helper()
	got, ok := s.DeviceShare(node)
	if !ok || math.Abs(got-want) > 1e-9 {
		t.Errorf("DeviceShare(%s) = %v, %v; want %v", node, got, ok, want)
	}
}

func TestDRAPartitionedGPUTakesSevenSlicesThenNoMore(t *testing.T) {
	ctx := context.Background()
	h := newDRAHandle(t, migFixture("mig-1"), makeNode("mig-1", "64").Obj())
	s := h.Snapshot()
	s.Fork()
	defer s.Revert()
	wantShare(t, s, "mig-1", 0)
	seen := map[string]bool{}
	for i := 0; i < 7; i++ {
		p := claimPod(fmt.Sprintf("p%d", i), "default", "1g.5gb")
		if err := h.CheckPod(ctx, p, "mig-1"); err != nil {
			t.Fatalf("1g pod %d of 7: %v", i, err)
		}
		if err := s.AddPod(p, "mig-1"); err != nil {
			t.Fatal(err)
		}
		for _, d := range allocatedDeviceNames(t, s, p) {
			if seen[d] {
				t.Errorf("device %s allocated twice", d)
			}
			seen[d] = true
		}
		if i == 0 {
			wantShare(t, s, "mig-1", 1.0/7)
			if err := h.CheckPod(ctx, claimPod("whole", "default", "whole"), "mig-1"); err == nil {
				t.Errorf("the whole GPU fits beside one of its 1g slices")
			}
		}
	}
	if got, total := s.DeviceUsage("mig-1"); got != 7 || total != 13 {
		t.Errorf("DeviceUsage = %d/%d, want 7/13", got, total)
	}
	wantShare(t, s, "mig-1", 1)
	for _, tmpl := range []string{"1g.5gb", "2g.10gb"} {
		if err := h.CheckPod(ctx, claimPod("eighth-"+tmpl, "default", tmpl), "mig-1"); err == nil {
			t.Errorf("a %s slice fits a GPU whose 7 slices are all taken", tmpl)
		}
	}
	// A copy of the node (a scale-up's) has a GPU of its own.
	if err := s.CopyNode("mig-1", makeNode("mig-copy", "64").Obj()); err != nil {
		t.Fatal(err)
	}
	if node, err := h.FitAnywhere(ctx, claimPod("eighth", "default", "1g.5gb"), nil); err != nil || node != "mig-copy" {
		t.Errorf("eighth 1g pod: %q, %v; want mig-copy", node, err)
	}
}

func TestDRAPartitionedGPUMixedProfiles(t *testing.T) {
	ctx := context.Background()
	h := newDRAHandle(t, migFixture("mig-1"), makeNode("mig-1", "64").Obj())
	s := h.Snapshot()
	s.Fork()
	defer s.Revert()
	// 3g + 2g + 2g = 7 slices, 40Gi of memory: the GPU is full.
	for i, tmpl := range []string{"3g.20gb", "2g.10gb", "2g.10gb"} {
		if err := s.AddPod(claimPod(fmt.Sprintf("p%d", i), "default", tmpl), "mig-1"); err != nil {
			t.Fatalf("%s pod: %v", tmpl, err)
		}
	}
	wantShare(t, s, "mig-1", 1)
	if err := h.CheckPod(ctx, claimPod("one-more", "default", "1g.5gb"), "mig-1"); err == nil {
		t.Errorf("a 1g slice fits a GPU whose 7 slices are taken by 3g+2g+2g")
	}
	s.Revert()
	s.Fork()
	if err := s.AddPod(claimPod("whole", "default", "whole"), "mig-1"); err != nil {
		t.Fatalf("whole GPU: %v", err)
	}
	wantShare(t, s, "mig-1", 1)
	if err := h.CheckPod(ctx, claimPod("slice", "default", "1g.5gb"), "mig-1"); err == nil {
		t.Errorf("a 1g slice fits beside the whole GPU")
	}
}

// TestDRAPartitionedGPUDrain: removing a node frees its slices for
// nothing; the pod of the removed node moves to a slice of another
// partitioned GPU, and only while that one has slices left.
func TestDRAPartitionedGPUDrain(t *testing.T) {
	ctx := context.Background()
	h := newDRAHandle(t, migFixture("mig-1", "mig-2"), makeNode("mig-1", "64").Obj(), makeNode("mig-2", "64").Obj())
	s := h.Snapshot()
	s.Fork()
	defer s.Revert()
	moving := claimPod("moving", "default", "1g.5gb")
	if err := s.AddPod(moving, "mig-1"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if err := s.AddPod(claimPod(fmt.Sprintf("p%d", i), "default", "1g.5gb"), "mig-2"); err != nil {
			t.Fatal(err)
		}
	}
	wantShare(t, s, "mig-2", 6.0/7)
	s.Fork()
	if err := s.RemoveNode("mig-1"); err != nil {
		t.Fatal(err)
	}
	moved := moving.DeepCopy()
	if node, err := h.FitAnywhere(ctx, moved, nil); err != nil || node != "mig-2" {
		t.Fatalf("pod of the removed node: %q, %v; want mig-2 (its last slice)", node, err)
	}
	if err := s.AddPod(moved, "mig-2"); err != nil {
		t.Fatal(err)
	}
	wantShare(t, s, "mig-2", 1)
	if node, err := h.FitAnywhere(ctx, claimPod("another", "default", "1g.5gb"), nil); err == nil {
		t.Errorf("a second pod found a slice on %s; none is left", node)
	}
	s.Revert()
	wantShare(t, s, "mig-1", 1.0/7)
}

func TestDRADeviceShareWithoutCounters(t *testing.T) {
	pod := ownClaimPod("p", "gpu-1", "p-gpu-x")
	src := newDRAFixture()
	src.slices = []*resourceapi.ResourceSlice{gpuSlice("gpu-1", "gpu-0", "gpu-1", "gpu-2", "gpu-3")}
	src.claims = []*resourceapi.ResourceClaim{allocatedClaim("p-gpu-x", "gpu-1", pod, pod)}
	h := newDRAHandle(t, src)
	s := h.Snapshot()
	s.Reset([]*apiv1.Node{makeNode("gpu-1", "4").Obj(), makeNode("plain", "4").Obj()}, []*apiv1.Pod{pod})
	wantShare(t, s, "gpu-1", 0.25)
	if got, ok := s.DeviceShare("plain"); ok {
		t.Errorf("DeviceShare of a node without devices = %v, true; want false", got)
	}
}
