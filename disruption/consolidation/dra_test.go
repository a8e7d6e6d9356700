package consolidation

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

const testDriver = "gpu.example.com"

// deviceSlice publishes one device of testDriver on node.
func deviceSlice(node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"},
		Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: &node,
			Pool:    resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "gpu-0"}}}}
}

// claimPod gives pod (on node) its own claim, from a template, holding the
// node's device; it returns the claim.
func claimPod(pod *apiv1.Pod, node string) *resourceapi.ResourceClaim {
	name := pod.Name + "-gpu"
	pod.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
	pod.Status.ResourceClaimStatuses = []apiv1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 1,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: testDriver, Pool: node, Device: "gpu-0"}}},
				NodeSelector: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{MatchFields: []apiv1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: apiv1.NodeSelectorOpIn, Values: []string{node}}}}}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}}}
}

// TestPlanDRAClaims: a pod whose claim holds its node's device moves only
// where its claim can be allocated anew.
func TestPlanDRAClaims(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keepBusy bool
		want     []verdict
	}{
		{"a free device on the node that stays", false, []verdict{{Nodes: []string{"n1"}}}},
		{"no free device on the node that stays", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{groups: oneGroup}
			c.node("n1", "g")
			c.node("keep", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
				Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
					CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + testDriver + `"`}}}}}
			objs := []runtime.Object{class, deviceSlice("n1"), deviceSlice("keep"),
				claimPod(c.pod("p", "web", "1", "n1").Obj(), "n1")}
			if tc.keepBusy {
				objs = append(objs, claimPod(c.pod("q", "db", "1", "keep").Obj(), "keep"))
			}
			ctx := context.Background()
			factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
			h, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory,
				framework.WithDRA(framework.NewInformerDRASource(factory)))
			if err != nil {
				t.Fatal(err)
			}
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			in := c.input(h)
			if a, total := h.Snapshot().DeviceUsage("n1"); a != 1 || total != 1 {
				t.Fatalf("n1 uses %d of %d devices, want 1 of 1", a, total)
			}
			got := NewPlanner(DefaultOptions()).Plan(ctx, in)
			if diff := cmp.Diff(tc.want, verdicts(got)); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			if a, _ := h.Snapshot().DeviceUsage("n1"); a != 1 {
				t.Errorf("after the plan n1 uses %d devices, want 1 (the snapshot reverted)", a)
			}
		})
	}
}
