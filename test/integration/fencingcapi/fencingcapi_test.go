package fencingcapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestNodeHealingFenceOnClusterAPIWithNodesSpeltOtherwise: the partitioned
// StatefulSet-with-volume heal on real Cluster API controllers, where the
// Nodes spell their provider IDs with an empty host (capitest:///ns/name)
// while the Machines say capitest://ns/name, and a deleted machine's VM takes
// 60 s to go. Cluster API matches Nodes by the exact provider ID, so these
// Machines never get a nodeRef and Cluster API never deletes their Nodes:
// only the autoscaler's provider, which matches the normalised ID, ties the
// Node to its Machine. The fence must wait for that Machine to be gone
// before the node is marked out of service; the second copy of the pod may
// appear only once the first one's Machine no longer exists.
func TestNodeHealingFenceOnClusterAPIWithNodesSpeltOtherwise(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	dyn := itest.StartCAPI(e)
	md := framework.UniqueName("fence")
	zone := "zone-" + e.Namespace
	itest.CreateMD(e, dyn, md, capi.Machine{CPU: "2", Memory: "8Gi", Labels: map[string]string{itest.ZoneLabel: zone},
		NodeProviderIDSpelling: "emptyHost", DeletionDelay: 60 * time.Second}, 1, itest.CAPISizes(1, 4), nil)
	class := itest.ZonalStorage(e, zone, 1)
	itest.StatefulSet(e, "db", md, class, 1, "1500m")
	itest.StartAutoscaler(t, "autoscaler", itest.CAPIArgs(e, "--node-healing-enabled",
		"--node-healing-policy=Ready=False:3s", "--node-healing-policy=Ready=Unknown:3s",
		"--max-pod-eviction-time=5s", "--max-node-provision-time=90s")...)
	first := itest.RunningPod(e, "db-0")
	old := first.Spec.NodeName
	node, err := e.Client.CoreV1().Nodes().Get(e.Context(), old, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Cluster API's Machine controller copies the provider ID from the
	// infrastructure machine on its own schedule: on a loaded machine the
	// pod may run before it has, so wait for it (a minute at most).
	var m *unstructured.Unstructured
	var machineID string
	e.Eventually(time.Minute, "Machine "+old+" with a provider ID", func(ctx context.Context) (bool, error) {
		machines, err := itest.MachinesOf(ctx, e, dyn, md)
		if err != nil {
			return false, err
		}
		m = machines[old]
		if m == nil {
			return false, nil
		}
		machineID = machineProviderID(m.Object)
		return machineID != "", nil
	})
	// What makes the case: the IDs differ, and Cluster API did not tie them.
	if machineID == "" || machineID == node.Spec.ProviderID {
		t.Fatalf("Machine provider ID %q, Node's %q: want both set and spelt differently", machineID, node.Spec.ProviderID)
	}
	if ref, ok := m.Object["status"].(map[string]any)["nodeRef"]; ok && ref != nil {
		t.Fatalf("Machine %s has nodeRef %v: the test needs a Machine Cluster API could not tie to its Node", old, ref)
	}

	copies := itest.WatchSecondCopyWhile(e, first, func(ctx context.Context) string {
		_, err := dyn.Resource(capi.GVR("machines")).Namespace(e.Namespace).Get(ctx, old, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("Machine %s, whose VM may still run the first, exists (get: %v)", old, err)
	})
	itest.PartitionNode(e, old)
	itest.HealedOnce(e, first, copies)
}

func machineProviderID(obj map[string]any) string {
	spec, _ := obj["spec"].(map[string]any)
	id, _ := spec["providerID"].(string)
	return id
}
