package dra

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestDRAAllocationModeAllScalesOneNodePerPod: 3 pods whose claims each ask
// for every device of the class on their node (allocationMode All), with a
// GPU group of 4 devices per node and a plain group without devices. Each
// pod takes a whole node's devices, so exactly 3 GPU nodes are added, none
// of the plain group; kube-scheduler allocates the 4 devices of each node
// to one claim and the pods run. Later loops add nothing.
func TestDRAAllocationModeAllScalesOneNodePerPod(t *testing.T) {
	e := framework.New(t)
	gpu, plain, driver, path := itest.DraGroups(e, 4)
	itest.DumpPods(e)
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "all"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: driver, AllocationMode: resourceapi.DeviceAllocationModeAll}}}}}}}
	if _, err := e.Client.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(e.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createClaimPods(e, "whole", "all", 3)

	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste")...)
	waitRunningWithClaims(e, 3, 120*time.Second, "all 3 pods Running with their claims allocated")
	if got := itest.NodesPerPool(e); got[gpu] != 3 || got[plain] != 0 {
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
	if got := itest.NodesPerPool(e); got[gpu] != 3 || got[plain] != 0 {
		t.Errorf("nodes changed after the pods ran: %v", got)
	}
}

// TestDRAFirstLoopCopiesTheNodesSlices: a group without a provider template
// (fromNodes) has one node publishing 2 devices, which runs 2 of 4
// one-device pods. The autoscaler's very first loop copies that node, its
// slices included, for the template, so that first loop adds the one node
// the other 2 pods need (before, the first loop's template had no devices
// and the pods waited a loop: "no node group offers 1 device").
func TestDRAFirstLoopCopiesTheNodesSlices(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("copied")
	driver := group + ".example.com"
	path := itest.WriteKwokGroups(e, itest.KwokGroup{Name: group, Driver: driver, Models: itest.Repeat("", 2), FromNodes: true})
	itest.DumpPods(e)
	itest.CreateDeviceClass(e, driver, driver)
	gpuGroupNode(e, group, group+"-first", driver, 2)
	createGPUDeployment(e, "first", driver, 4)
	// Both other pods must be marked unschedulable before the first loop.
	e.Eventually(60*time.Second, "2 pods Running on the first node, 2 unschedulable", func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running, unschedulable := 0, 0
		for _, p := range pods.Items {
			if p.Status.Phase == apiv1.PodRunning {
				running++
			}
			for _, c := range p.Status.Conditions {
				if c.Type == apiv1.PodScheduled && c.Reason == apiv1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		return running == 2 && unschedulable == 2, nil
	})

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	waitRunningWithClaims(e, 4, 120*time.Second, "all 4 pods Running with their claims allocated")
	if got := itest.NodesPerPool(e)[group]; got != 2 {
		t.Errorf("%d nodes in the group, want 2 (the first and one new)", got)
	}
	var scaleUps []string
	for _, line := range strings.Split(p.Log.String(), "\n") {
		if strings.Contains(line, `"Scaled up node group"`) {
			scaleUps = append(scaleUps, line)
		}
	}
	if len(scaleUps) != 1 || !strings.Contains(scaleUps[0], "loop=1 ") {
		t.Errorf("scale-ups %q, want one, in loop 1", scaleUps)
	}
}

// TestDRAAdminAccessSharesTheDevice: in a namespace labelled for admin
// access, a pod claiming one device and a monitoring pod claiming one
// device with admin access, with a group of one device per node. Admin
// access takes no device, so one node holds both: exactly one node is
// added and both pods run on it.
func TestDRAAdminAccessSharesTheDevice(t *testing.T) {
	e := framework.New(t)
	gpu, plain, driver, path := itest.DraGroups(e, 1)
	patch := []byte(`{"metadata":{"labels":{"resource.kubernetes.io/admin-access":"true"}}}`)
	if _, err := e.Client.CoreV1().Namespaces().Patch(e.Context(), e.Namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.DumpPods(e)
	for name, admin := range map[string]bool{"one": false, "admin": true} {
		req := &resourceapi.ExactDeviceRequest{DeviceClassName: driver, Count: 1,
			AllocationMode: resourceapi.DeviceAllocationModeExactCount}
		if admin {
			req.AdminAccess = ptr.To(true)
		}
		tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}}}}
		if _, err := e.Client.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(e.Context(), tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createClaimPods(e, "monitor", "admin", 1)
	createClaimPods(e, "user", "one", 1)

	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste")...)
	waitRunningWithClaims(e, 2, 120*time.Second, "both pods Running with their claims allocated")
	if got := itest.NodesPerPool(e); got[gpu] != 1 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want %s:1 and no %s node", got, gpu, plain)
	}
	if nodes := podNodes(e); nodes["monitor-0"] != nodes["user-0"] {
		t.Errorf("pods on %v, want both on the one node", nodes)
	}
	// Several more loops (scan interval 1s) must not add anything.
	time.Sleep(4 * time.Second)
	if got := itest.NodesPerPool(e); got[gpu] != 1 || got[plain] != 0 {
		t.Errorf("nodes changed after the pods ran: %v", got)
	}
}
