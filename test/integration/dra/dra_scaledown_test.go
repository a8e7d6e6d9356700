package dra

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// gpuGroupNode creates a Node of the kwok provider's group and, playing
// its DRA driver, a ResourceSlice of devices devices of driver for it
// (owned by the Node).
func gpuGroupNode(e *framework.Env, group, name, driver string, devices int) {
	e.T.Helper()
	n := framework.MakeNode(name).Resources("8", "32Gi", "110").Label("pool", group).Obj()
	n.Annotations[kwok.NodeGroupAnnotation] = group
	n.Spec.ProviderID = kwok.ProviderIDPrefix + name
	created := e.CreateNode(n)
	sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: created.UID}}},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: &name,
			Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}}}
	for i := 0; i < devices; i++ {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	if _, err := e.Client.ResourceV1().ResourceSlices().Create(e.Context(), sl, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		_ = e.Client.ResourceV1().ResourceSlices().Delete(context.Background(), sl.Name, metav1.DeleteOptions{})
	})
}

func cordon(e *framework.Env, node string, on bool) {
	e.T.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on))
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// appOnNode waits until app's one pod runs on node with its claims allocated.
func appOnNode(e *framework.Env, app, node string) {
	e.T.Helper()
	e.Eventually(60*time.Second, app+" running on "+node, func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, app)
		return err == nil && running == 1 && nodes[node] == 1, err
	})
}

// unremovableNodes reads the status ConfigMap's unremovable nodes, by node.
func unremovableNodes(ctx context.Context, e *framework.Env) (map[string]clusterstate.UnremovableNode, error) {
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // not written yet
	}
	if err != nil {
		return nil, err
	}
	var kept []clusterstate.UnremovableNode
	if err := yaml.Unmarshal([]byte(cm.Data[clusterstate.UnremovableDataKey]), &kept); err != nil {
		return nil, err
	}
	out := map[string]clusterstate.UnremovableNode{}
	for _, u := range kept {
		out[u.Name] = u
	}
	return out, nil
}

// TestDRAScaleDownMovesClaimsWhereTheyFit: three GPU nodes of 4 devices
// each: a runs a pod with a claim for 1 device, b one for 4, c one for 2.
// With --scale-down-gpu-utilization-threshold=0.8, b (4 of 4 devices) is
// not underutilised; a (1 of 4) is: its pod's claim can be allocated anew on c, so a is drained
// and removed, and the pod runs on c with a new claim. c (2, then 3 of 4)
// stays: its pods' claims fit no other node, and the status ConfigMap
// names the claim.
func TestDRAScaleDownMovesClaimsWhereTheyFit(t *testing.T) {
	e := framework.New(t)
	gpu, _, driver, path := itest.DraGroups(e, 4)
	itest.DumpPods(e)
	a, b, c := gpu+"-a", gpu+"-b", gpu+"-c"

	// Placed one by one so that each pod has one possible node.
	gpuGroupNode(e, gpu, a, driver, 4)
	createDevicesDeployment(e, "one", driver, 1, 1)
	appOnNode(e, "one", a)
	cordon(e, a, true)
	gpuGroupNode(e, gpu, b, driver, 4)
	createDevicesDeployment(e, "four", driver, 1, 4)
	appOnNode(e, "four", b)
	gpuGroupNode(e, gpu, c, driver, 4)
	createDevicesDeployment(e, "two", driver, 1, 2)
	appOnNode(e, "two", c)
	cordon(e, a, false)

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--scale-down-gpu-utilization-threshold=0.8")...)
	e.Eventually(120*time.Second, "node a removed, its pod running on c with a claim allocated", func(ctx context.Context) (bool, error) {
		if _, err := e.Client.CoreV1().Nodes().Get(ctx, a, metav1.GetOptions{}); err == nil {
			return false, nil
		}
		running, nodes, err := itest.PodsOf(ctx, e, "one")
		if err != nil || running != 1 || nodes[c] != 1 {
			return false, err
		}
		n, err := allocatedClaims(ctx, e)
		return n == 3, err
	})
	var kept map[string]clusterstate.UnremovableNode
	e.Eventually(60*time.Second, "c kept for its pods' claims, named in the status", func(ctx context.Context) (bool, error) {
		var err error
		kept, err = unremovableNodes(ctx, e)
		if err != nil {
			return false, err
		}
		u := kept[c]
		return (u.Reason == "NoPlaceToMovePods" || u.Reason == "RecentlyUnremovable") &&
			strings.Contains(u.Detail, "resource claim(s) "+e.Namespace+"/"), nil
	})
	t.Logf("c kept: %+v", kept[c])
	if kept[b].Reason != "NotUnderutilized" {
		t.Errorf("b (every device allocated): %+v, want NotUnderutilized", kept[b])
	}
	for _, n := range []string{b, c} {
		if _, err := e.Client.CoreV1().Nodes().Get(e.Context(), n, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s: %v", n, err)
		}
	}
	// The Node can be gone before the autoscaler logs the removal it made.
	e.Eventually(30*time.Second, "the drain of a logged", func(context.Context) (bool, error) {
		return p.Log.Contains("Scaled down a node after draining it"), nil
	})
}
