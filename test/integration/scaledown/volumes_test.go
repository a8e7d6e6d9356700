package scaledown

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// boundClaims counts the test's PVCs the PV controller has bound.
func boundClaims(ctx context.Context, e *framework.Env) (int, error) {
	list, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	bound := 0
	for _, c := range list.Items {
		if c.Status.Phase == apiv1.ClaimBound {
			bound++
		}
	}
	return bound, nil
}

// TestStatefulSetWithVolumesScalesUpAndDown: a StatefulSet whose pods claim
// zonal, statically provisioned volumes through a WaitForFirstConsumer
// StorageClass makes the autoscaler add kwok nodes in the volumes' zone;
// kube-scheduler places the pods there and the PV controller binds their
// claims. Scaled down to one replica, the StatefulSet leaves nodes the
// autoscaler removes (simulating the move of a pod with a bound claim), down
// to the one node its last pod needs. The autoscaler never crashes (pods
// with claims used to panic it in the scheduler framework's volume plugins).
func TestStatefulSetWithVolumesScalesUpAndDown(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("vol")
	zone := "zone-" + e.Namespace
	// The group's template carries the zone label the PVs' node affinity asks for.
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: 5
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s, %[4]s: %[5]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, group, framework.TestNamespaceLabel, e.Namespace, itest.ZoneLabel, zone))
	itest.DumpPods(e)
	class := itest.ZonalStorage(e, zone, 3)
	// 1.5 CPU each: two pods per 4-CPU node, so three pods need two nodes.
	itest.StatefulSet(e, "db", group, class, 3, "1500m")
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path)...)
	alive := func() error {
		select {
		case <-p.Done:
			return fmt.Errorf("the autoscaler exited: %v", p.ExitErr)
		default:
		}
		if p.Log.Contains("panic") {
			return fmt.Errorf("the autoscaler logged a panic")
		}
		return nil
	}

	e.Eventually(120*time.Second, "three db pods Running on new nodes of the group, their claims bound", func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		running, nodes, err := itest.PodsOf(ctx, e, "db")
		if err != nil || running != 3 {
			return false, err
		}
		for node := range nodes {
			if !strings.HasPrefix(node, group) {
				return false, fmt.Errorf("a db pod runs on %s, not on a node of %s", node, group)
			}
		}
		bound, err := boundClaims(ctx, e)
		return err == nil && bound == 3, err
	})
	if n := len(itest.NodeNames(e, group)); n != 2 {
		t.Errorf("the group has %d nodes after the scale-up, want 2 (two 1.5-CPU pods per 4-CPU node)", n)
	}

	patch := []byte(`{"spec":{"replicas":1}}`)
	if _, err := e.Client.AppsV1().StatefulSets(e.Namespace).Patch(e.Context(), "db", types.MergePatchType, patch,
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "one node left, running db-0", func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		running, nodes, err := itest.PodsOf(ctx, e, "db")
		if err != nil || running != 1 || len(itest.NodeNames(e, group)) != 1 {
			return false, err
		}
		for node := range nodes {
			if node != itest.NodeNames(e, group)[0] {
				return false, nil
			}
		}
		return p.Log.Contains("Scaled down"), nil
	})
	time.Sleep(5 * time.Second) // a few more loops with the claims in the snapshot
	if err := alive(); err != nil {
		t.Fatal(err)
	}
}
