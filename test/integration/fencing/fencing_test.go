package fencing

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestNodeHealingFencesAPartitionedNode: a StatefulSet pod with a zonal
// volume runs on a node that is cut off (NotReady, its pod still "Running"
// as far as anyone can tell). The heal replaces the node, but never lets the
// pod go while the machine may still run it: the node's instance is deleted
// by name first, and the second copy of the pod appears only once that node
// is gone; it then runs on the replacement with the same claim.
func TestNodeHealingFencesAPartitionedNode(t *testing.T) {
	t.Parallel()
	fencePartitionedNode(t, "", "20s")
}

// TestNodeHealingFenceMatchesTheNodeAsItsProviderDoes: the same, on a
// cloud that writes the Nodes' provider IDs with the empty host
// (kwok:///<name>, as AWS's aws:///zone/id against aws://zone/id) and takes
// 60 s to terminate a deleted instance (longer than the pod garbage
// collector's 20 s period, so that it acts while the old machine stands).
// The fence must see the instance still listed, as the provider matches it
// to the Node: comparing the Node's provider ID byte for byte with the
// listed ids (the old fence) found no instance in the loop that deleted it,
// marked the node out of service, and the pod garbage collector let the
// second copy start while the first one's machine still ran.
func TestNodeHealingFenceMatchesTheNodeAsItsProviderDoes(t *testing.T) {
	t.Parallel()
	fencePartitionedNode(t, "  faults: {nodeProviderIDSpelling: emptyHost, deletionDelay: 60s}\n", "90s")
}

// The two tests run at once (each waits minutes on timers: a node's
// heal, a deletion delay, a provision timeout): each has its own namespace,
// node group and autoscaler, and each autoscaler heals only the nodes of
// its own group.

// fencePartitionedNode runs the partitioned-node heal on a group with the
// given kwok faults; provision is --max-node-provision-time, which also
// bounds how long the heal waits for the deleted instance to go.
func fencePartitionedNode(t *testing.T, faults, provision string) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool := framework.UniqueName("fence")
	zone := "zone-" + e.Namespace
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  maxSize: 4
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s, %[4]s: %[5]s}
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
%[6]s`, pool, framework.TestNamespaceLabel, e.Namespace, itest.ZoneLabel, zone, faults))
	class := itest.ZonalStorage(e, zone, 1)
	itest.StatefulSet(e, "db", pool, class, 1, "1500m")
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--node-healing-enabled",
		"--node-healing-policy=Ready=False:3s", "--node-healing-policy=Ready=Unknown:3s",
		"--max-pod-eviction-time=5s", "--max-node-provision-time="+provision)...)
	first := itest.RunningPod(e, "db-0")
	old := first.Spec.NodeName
	copies := itest.WatchSecondCopy(e, first)
	itest.PartitionNode(e, old)
	itest.HealedOnce(e, first, copies)
	if _, err := e.Client.CoreV1().Nodes().Get(e.Context(), old, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s still exists after its heal (get: %v)", old, err)
	}
}
