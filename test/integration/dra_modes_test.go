package integration

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestDRAAllocationModeAllScalesOneNodePerPod: 3 pods whose claims each ask
// for every device of the class on their node (allocationMode All), with a
// GPU group of 4 devices per node and a plain group without devices. Each
// pod takes a whole node's devices, so exactly 3 GPU nodes are added, none
// of the plain group; kube-scheduler allocates the 4 devices of each node
// to one claim and the pods run. Later loops add nothing.
func TestDRAAllocationModeAllScalesOneNodePerPod(t *testing.T) {
	e := framework.New(t)
	gpu, plain := framework.UniqueName("gpu"), framework.UniqueName("plain")
	driver := gpu + ".example.com"
	path := draConfig(e, gpu, plain, driver, 4)
	dumpPods(e)
	createDeviceClass(e, driver, driver)
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "all"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: driver, AllocationMode: resourceapi.DeviceAllocationModeAll}}}}}}}
	if _, err := e.Client.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(e.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createClaimPods(e, "whole", "all", 3)

	startAutoscaler(t, "autoscaler", scaleUpArgs(e, path, "--expander=least-waste")...)
	e.Eventually(120*time.Second, "all 3 pods Running with their claims allocated", func(ctx context.Context) (bool, error) {
		if ok, err := allRunning(ctx, e, 3); !ok || err != nil {
			return false, err
		}
		n, err := allocatedClaims(ctx, e)
		return n == 3, err
	})
	if got := nodesPerPool(e); got[gpu] != 3 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want %s:3 and no %s node", got, gpu, plain)
	}
	claims, err := e.Client.ResourceV1().ResourceClaims(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 4 {
			t.Errorf("claim %s: allocation %+v, want the 4 devices of one node", c.Name, c.Status.Allocation)
		}
	}
	// Several more loops (scan interval 1s) must not add anything.
	time.Sleep(4 * time.Second)
	if got := nodesPerPool(e); got[gpu] != 3 || got[plain] != 0 {
		t.Errorf("nodes changed after the pods ran: %v", got)
	}
}
