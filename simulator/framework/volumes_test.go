package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const (
	zoneLabel = "topology.kubernetes.io/zone"
	csiDriver = "csi.example.com"
)

// newVolumeHandle builds a handle whose informers hold objs, as cluster-autoscaler/scaleup.go does:
// the factory is started after New.
func newVolumeHandle(t *testing.T, s *Snapshot, objs ...runtime.Object) *Handle {
	t.Helper()
	ctx := t.Context()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	h, err := New(ctx, s, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return h
}

// eventually retries check until it returns nil: the volume binder's PV and
// PVC caches are fed by informer event handlers, a moment after the sync.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

// fitsOnly checks that pod fits node want and, for each other node, is
// refused for a reason mentioning reason.
func fitsOnly(h *Handle, pod *apiv1.Pod, want string, others map[string]string) error {
	ctx := context.Background()
	if want != "" {
		if err := h.CheckPod(ctx, pod, want); err != nil {
			return fmt.Errorf("on %s: %w", want, err)
		}
	}
	for node, reason := range others {
		err := h.CheckPod(ctx, pod, node)
		if err == nil || !strings.Contains(err.Error(), reason) {
			return fmt.Errorf("on %s: %v, want a refusal mentioning %q", node, err, reason)
		}
	}
	return nil
}

func zonalNode(name, zone string) *apiv1.Node {
	return makeNode(name, "4").Label(zoneLabel, zone).Obj()
}

func wffcClass() *storagev1.StorageClass {
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "kubernetes.io/no-provisioner",
		VolumeBindingMode: &mode}
}

// zonalPV is a PV of class "local" that only nodes of zone can use; with a
// driver it is a CSI volume of that driver.
func zonalPV(name, zone, driver string) *apiv1.PersistentVolume {
	pv := &apiv1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec: apiv1.PersistentVolumeSpec{
			StorageClassName: "local",
			Capacity:         apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:      []apiv1.PersistentVolumeAccessMode{apiv1.ReadWriteOnce},
			NodeAffinity: &apiv1.VolumeNodeAffinity{Required: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{
				MatchExpressions: []apiv1.NodeSelectorRequirement{{Key: zoneLabel, Operator: apiv1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
		Status: apiv1.PersistentVolumeStatus{Phase: apiv1.VolumeAvailable},
	}
	if driver != "" {
		pv.Spec.CSI = &apiv1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name}
	} else {
		pv.Spec.Local = &apiv1.LocalVolumeSource{Path: "/mnt/" + name}
	}
	return pv
}

// claim is a PVC of class "local"; bound to pv when pv is not nil.
func claim(name string, pv *apiv1.PersistentVolume, modes ...apiv1.PersistentVolumeAccessMode) *apiv1.PersistentVolumeClaim {
	if len(modes) == 0 {
		modes = []apiv1.PersistentVolumeAccessMode{apiv1.ReadWriteOnce}
	}
	c := &apiv1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("pvc-" + name)},
		Spec: apiv1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("local"), AccessModes: modes,
			Resources: apiv1.VolumeResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: apiv1.PersistentVolumeClaimStatus{Phase: apiv1.ClaimPending},
	}
	if pv != nil {
		c.Spec.VolumeName = pv.Name
		c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"} // as the PV controller leaves it
		c.Status.Phase = apiv1.ClaimBound
		c.Status.AccessModes = modes
		c.Status.Capacity = pv.Spec.Capacity
		pv.Spec.ClaimRef = &apiv1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: name, UID: c.UID}
		pv.Status.Phase = apiv1.VolumeBound
	}
	return c
}

// ephemeralVolume is a generic ephemeral volume of 1Gi in class "local".
func ephemeralVolume() apiv1.VolumeSource {
	return apiv1.VolumeSource{Ephemeral: &apiv1.EphemeralVolumeSource{VolumeClaimTemplate: &apiv1.PersistentVolumeClaimTemplate{
		Spec: apiv1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("local"),
			AccessModes: []apiv1.PersistentVolumeAccessMode{apiv1.ReadWriteOnce},
			Resources:   apiv1.VolumeResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("1Gi")}}},
	}}}
}

// ephemeralClaim is the PVC the ephemeral volume controller creates for pod.
func ephemeralClaim(pod *apiv1.Pod, volume string) *apiv1.PersistentVolumeClaim {
	c := claim(pod.Name+"-"+volume, nil)
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	return c
}

func csiNode(name string, limit int32) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
		Name: csiDriver, NodeID: name, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(limit)}}}}}
}

// TestPodsWithVolumesAreSimulated: each kind of volume a StatefulSet or a
// Deployment uses goes through the volume plugins (they used to dereference
// a missing CSI manager and panic) and gets their verdict.
func TestPodsWithVolumesAreSimulated(t *testing.T) {
	boundPV := zonalPV("pv-bound", "a", "")
	freePV := zonalPV("pv-free", "a", "")
	eph := makePod("eph", "1").Volume("data", ephemeralVolume()).Obj()
	objs := []runtime.Object{wffcClass(), boundPV, freePV, claim("bound", boundPV), claim("unbound", nil), ephemeralClaim(eph, "data")}
	s := NewSnapshot([]*apiv1.Node{zonalNode("in-a", "a"), zonalNode("in-b", "b")}, nil)
	h := newVolumeHandle(t, s, objs...)
	token := makePod("token", "1").Obj()
	token.Spec.Volumes = []apiv1.Volume{{Name: "kube-api-access", VolumeSource: apiv1.VolumeSource{Projected: &apiv1.ProjectedVolumeSource{
		Sources: []apiv1.VolumeProjection{{ServiceAccountToken: &apiv1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}}}}}}}
	for _, tc := range []struct {
		name   string
		pod    *apiv1.Pod
		fits   string
		others map[string]string
	}{
		{name: "bound zonal PV", pod: makePod("p", "1").Claim("bound").Obj(), fits: "in-a",
			others: map[string]string{"in-b": "didn't match PersistentVolume's node affinity"}},
		{name: "unbound claim, WaitForFirstConsumer", pod: makePod("p", "1").Claim("unbound").Obj(), fits: "in-a",
			others: map[string]string{"in-b": "didn't find available persistent volumes to bind"}},
		{name: "generic ephemeral volume", pod: eph, fits: "in-a",
			others: map[string]string{"in-b": "didn't find available persistent volumes to bind"}},
		{name: "ephemeral volume whose claim is not there yet", pod: makePod("early", "1").Volume("data", ephemeralVolume()).Obj(),
			others: map[string]string{"in-a": "ephemeral volume controller", "in-b": "ephemeral volume controller"}},
		{name: "missing claim", pod: makePod("p", "1").Claim("gone").Obj(),
			others: map[string]string{"in-a": "not found"}},
		{name: "projected service-account token", pod: token, fits: "in-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eventually(t, tc.name, func() error { return fitsOnly(h, tc.pod, tc.fits, tc.others) })
		})
	}
}

// TestReadWriteOncePodClaim: a ReadWriteOncePod claim in use keeps a second
// pod off every node, and simulating the user's removal frees it.
func TestReadWriteOncePodClaim(t *testing.T) {
	pv := zonalPV("pv-rwop", "a", "")
	c := claim("rwop", pv, apiv1.ReadWriteOncePod)
	user := makePod("user", "1").Claim("rwop").On("in-a").Obj()
	s := NewSnapshot([]*apiv1.Node{zonalNode("in-a", "a"), zonalNode("in-a2", "a")}, []*apiv1.Pod{user})
	h := newVolumeHandle(t, s, wffcClass(), pv, c)
	second := makePod("second", "1").Claim("rwop").Obj()
	eventually(t, "the second pod refused", func() error {
		return fitsOnly(h, second, "", map[string]string{"in-a": "ReadWriteOncePod", "in-a2": "ReadWriteOncePod"})
	})
	s.Fork()
	if err := s.RemovePod(user, "in-a"); err != nil {
		t.Fatal(err)
	}
	if err := h.CheckPod(context.Background(), second, "in-a2"); err != nil {
		t.Errorf("with the user gone the second pod should fit: %v", err)
	}
	s.Revert()
	if err := h.CheckPod(context.Background(), second, "in-a2"); err == nil {
		t.Error("after the revert the second pod fits again")
	}
}

// TestCSIVolumeLimits: a CSINode attach limit binds on a real node (the
// informer's CSINode) and on a simulated node (the snapshot's own CSINode,
// inherited by twins); a node without CSINode has no limit.
func TestCSIVolumeLimits(t *testing.T) {
	var objs []runtime.Object
	objs = append(objs, wffcClass(), csiNode("real", 1))
	for _, n := range []string{"used", "new"} {
		pv := zonalPV("pv-"+n, "a", csiDriver)
		objs = append(objs, pv, claim(n, pv))
	}
	used := makePod("used", "100m").Claim("used").On("real").Obj()
	s := NewSnapshot([]*apiv1.Node{zonalNode("real", "a"), zonalNode("unlimited", "a")}, []*apiv1.Pod{used})
	h := newVolumeHandle(t, s, objs...)
	pod := makePod("p", "100m").Claim("new").Obj()
	eventually(t, "the real node's limit", func() error {
		return fitsOnly(h, pod, "unlimited", map[string]string{"real": "exceed max volume count"})
	})

	s.Fork()
	defer s.Revert()
	if err := s.AddNode(zonalNode("template-ng-0", "a"), withNodeName(used, "template-ng-0")); err != nil {
		t.Fatal(err)
	}
	if err := h.CheckPod(context.Background(), pod, "template-ng-0"); err != nil {
		t.Errorf("a simulated node without CSINode has no limit: %v", err)
	}
	s.SetCSINode("template-ng-0", csiNode("template-ng-0", 1))
	if err := s.CopyNode("template-ng-0", zonalNode("template-ng-1", "a")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"template-ng-0", "template-ng-1"} {
		if err := h.CheckPod(context.Background(), pod, n); err == nil || !strings.Contains(err.Error(), "exceed max volume count") {
			t.Errorf("on %s: %v, want the CSINode limit", n, err)
		}
	}
	s.Fork()
	if err := s.RemoveNode("template-ng-1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.CSINode("template-ng-1"); ok {
		t.Error("a removed node keeps its CSINode")
	}
	s.Revert()
	if _, ok := s.CSINode("template-ng-1"); !ok {
		t.Error("revert did not restore the CSINode of the twin")
	}
}

// TestRemovalSimulationMovesPodsWithClaims simulates removing a node, as
// scale-down does: its pod with a bound zonal volume may only go to another
// node of the volume's zone.
func TestRemovalSimulationMovesPodsWithClaims(t *testing.T) {
	pv := zonalPV("pv-data", "a", "")
	c := claim("data", pv)
	p := makePod("db-0", "1").Claim("data").On("leaving").Obj()
	s := NewSnapshot([]*apiv1.Node{zonalNode("leaving", "a"), zonalNode("in-b", "b"), zonalNode("in-a", "a")}, []*apiv1.Pod{p})
	h := newVolumeHandle(t, s, wffcClass(), pv, c)
	moved := p.DeepCopy()
	moved.Spec.NodeName = ""
	eventually(t, "the pod's claim known", func() error {
		return fitsOnly(h, moved, "in-a", map[string]string{"in-b": "PersistentVolume's node affinity"})
	})
	s.Fork()
	defer s.Revert()
	if err := s.RemoveNode("leaving"); err != nil {
		t.Fatal(err)
	}
	dest, err := h.FitAnywhere(context.Background(), moved, nil)
	if err != nil || dest != "in-a" {
		t.Errorf("the pod moves to %q, %v; want in-a", dest, err)
	}
}
