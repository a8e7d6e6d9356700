package dra

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// createClaimPods creates n one-CPU pods named prefix-<i> whose claim
// "gpu" is made from the ResourceClaimTemplate template.
func createClaimPods(e *framework.Env, prefix, template string, n int) {
	e.T.Helper()
	for i := 0; i < n; i++ {
		pc := apiv1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}
		pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: apiv1.PodSpec{ResourceClaims: []apiv1.PodResourceClaim{pc},
				Containers: []apiv1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: apiv1.ResourceRequirements{
						Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
							apiv1.ResourceMemory: resource.MustParse("1Gi")},
						Claims: []apiv1.ResourceClaim{{Name: "gpu"}}}}}}}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
			e.T.Fatal(err)
		}
	}
}

// podNodes returns the node of every pod of the test, by pod name.
func podNodes(e *framework.Env) map[string]string {
	e.T.Helper()
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Spec.NodeName
	}
	return out
}

// TestDRAMatchAttributePicksTheGroupWithEnoughMatchingDevices: a pod
// claims 8 devices that must share their model (matchAttribute). Of three
// groups, one offers 4 devices per node, one 8 of two models (4 + 4), one
// 8 of one model; the priority expander prefers the first two, yet only the
// third can hold the claim, and it alone gets a node, on which the pod runs
// with its 8 devices.
func TestDRAMatchAttributePicksTheGroupWithEnoughMatchingDevices(t *testing.T) {
	e := framework.New(t)
	four, mixed, eight := framework.UniqueName("four"), framework.UniqueName("mixed"), framework.UniqueName("eight")
	driver := eight + ".example.com"
	path := itest.WriteKwokGroups(e, itest.KwokGroup{Name: four, MaxSize: 5, Driver: driver, Models: itest.Repeat("a100", 4)},
		itest.KwokGroup{Name: mixed, MaxSize: 5, Driver: driver, Models: append(itest.Repeat("a100", 4), itest.Repeat("h100", 4)...)},
		itest.KwokGroup{Name: eight, MaxSize: 5, Driver: driver, Models: itest.Repeat("h100", 8)})
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(),
		itest.PriorityConfigMap(e, fmt.Sprintf("30:\n  - ^%s$\n20:\n  - ^%s$\n10:\n  - .*\n", mixed, four)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.DumpPods(e)
	itest.CreateDeviceClass(e, driver, driver)
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "eight"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: driver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 8}}},
			Constraints: []resourceapi.DeviceConstraint{{
				MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(driver + "/model"))}}}}}}
	if _, err := e.Client.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(e.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createClaimPods(e, "big", "eight", 1)

	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=priority")...)
	waitRunningWithClaims(e, 1, 120*time.Second, "the pod Running with its claim allocated")
	if got := itest.NodesPerPool(e); got[eight] != 1 || got[four] != 0 || got[mixed] != 0 {
		t.Errorf("nodes per group = %v, want one %s node only", got, eight)
	}
	// Several more loops (scan interval 1s) must not add anything.
	time.Sleep(4 * time.Second)
	if got := itest.NodesPerPool(e); got[eight] != 1 || got[four] != 0 || got[mixed] != 0 {
		t.Errorf("nodes changed after the pod ran: %v", got)
	}
}

// TestDRASharedClaimPodsLandOnOneNode: 3 pods share one ResourceClaim for
// one device (2 devices per node). The simulation allocates the claim once,
// on one node, and the other pods can only go where it is: one node is
// added, not one per pod, and all 3 pods run on it.
func TestDRASharedClaimPodsLandOnOneNode(t *testing.T) {
	e := framework.New(t)
	gpu, plain, driver, path := itest.DraGroups(e, 2)
	itest.DumpPods(e)
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "shared"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: driver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	if _, err := e.Client.ResourceV1().ResourceClaims(e.Namespace).Create(e.Context(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "sharing"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "sharing"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				ResourceClaims: []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}},
				Containers: []apiv1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: apiv1.ResourceRequirements{
						Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
							apiv1.ResourceMemory: resource.MustParse("1Gi")},
						Claims: []apiv1.ResourceClaim{{Name: "gpu"}}}}}}}}}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste")...)
	e.Eventually(120*time.Second, "the 3 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 3)
	})
	nodes := map[string]bool{}
	for _, n := range podNodes(e) {
		nodes[n] = true
	}
	if len(nodes) != 1 {
		t.Errorf("the pods sharing a claim run on %v, want one node", nodes)
	}
	if got := itest.NodesPerPool(e); got[gpu] != 1 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want one %s node", got, gpu)
	}
	time.Sleep(4 * time.Second)
	if got := itest.NodesPerPool(e); got[gpu] != 1 || got[plain] != 0 {
		t.Errorf("nodes changed after the pods ran: %v", got)
	}
}
