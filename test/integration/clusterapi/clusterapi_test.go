package clusterapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestClusterAPIScalesMachineDeployment: the real binary with
// --cloud-provider=clusterapi scales an annotated MachineDeployment up for
// pending pods; Cluster API's controllers create the MachineSet's Machines,
// the pods run on their Nodes; when one node empties, scale-down marks
// exactly that node's Machine and lowers the replicas, and Cluster API's
// MachineSet controller deletes that Machine (and its Node), not another.
func TestClusterAPIScalesMachineDeployment(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	dyn := itest.StartCAPI(e)
	md := framework.UniqueName("md")
	itest.CreateMD(e, dyn, md, capi.Machine{CPU: "4", Memory: "16Gi"}, 1, itest.CAPISizes(1, 5), nil)
	e.Eventually(60*time.Second, "the MachineDeployment's first node", func(ctx context.Context) (bool, error) {
		nodes, err := itest.PoolNodes(ctx, e, md)
		return len(nodes) == 1, err
	})

	itest.CreatePods(e, "web", 3, "3", map[string]string{capi.PoolLabel: md}) // one 4-CPU node each
	p := itest.StartAutoscaler(t, "autoscaler", itest.CAPIArgs(e, "--scale-down-unneeded-time=5s", "--scale-down-delay-after-add=0s")...)
	e.Eventually(120*time.Second, "all 3 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 3)
	})
	if got := itest.MDReplicas(e, dyn, md); got != 3 {
		t.Fatalf("MachineDeployment replicas = %d after the scale-up, want 3", got)
	}
	if !p.Log.Written("Scaled Cluster API node group up") {
		t.Error("no scale-up of the Cluster API group logged")
	}

	// Empty one node: its Machine, and only it, goes.
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Context(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	victim := pod.Spec.NodeName
	before, err := itest.MachinesOf(e.Context(), e, dyn, md)
	if err != nil {
		t.Fatal(err)
	}
	if before[victim] == nil {
		t.Fatalf("node %s has no Machine of the same name among %d", victim, len(before))
	}
	if err := e.Client.CoreV1().Pods(e.Namespace).Delete(e.Context(), "web-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "node and Machine "+victim+" removed", func(ctx context.Context) (bool, error) {
		nodes, err := itest.PoolNodes(ctx, e, md)
		if err != nil {
			return false, err
		}
		machines, err := itest.MachinesOf(ctx, e, dyn, md)
		return len(nodes) == 2 && !nodes[victim] && len(machines) == 2 && machines[victim] == nil, err
	})
	after, err := itest.MachinesOf(e.Context(), e, dyn, md)
	if err != nil {
		t.Fatal(err)
	}
	for n := range before {
		if n != victim && after[n] == nil {
			t.Errorf("Machine %s was removed, only %s should have been", n, victim)
		}
	}
	for n, m := range after {
		if _, marked := m.GetAnnotations()[capi.DeleteMachineAnnotation]; marked {
			t.Errorf("Machine %s was marked for deletion but is not the removed node's", n)
		}
	}
	if got := itest.MDReplicas(e, dyn, md); got != 2 {
		t.Errorf("MachineDeployment replicas = %d after the scale-down, want 2", got)
	}
	if !strings.Contains(p.Log.String(), `"Marked a Cluster API Machine for deletion"`) ||
		!strings.Contains(p.Log.String(), e.Namespace+"/"+victim) {
		t.Error("the marking of the victim's Machine is not logged")
	}
	e.Eventually(30*time.Second, "2 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
}

// TestClusterAPIScalesFromZero: MachineDeployments at 0 replicas are scaled
// up for pods that only their template fits, one template known from the
// capacity annotations, one from its infrastructure template's
// status.capacity; --cloud-config names the management cluster's
// kubeconfig; a group with invalid size annotations is logged and left alone.
func TestClusterAPIScalesFromZero(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	dyn := itest.StartCAPI(e)
	byAnn, byInfra, bad := framework.UniqueName("zero"), framework.UniqueName("infra"), framework.UniqueName("bad")
	ann := itest.CAPISizes(0, 3)
	ann["capacity.cluster-autoscaler.kubernetes.io/cpu"] = "8"
	ann["capacity.cluster-autoscaler.kubernetes.io/memory"] = "32Gi"
	ann["capacity.cluster-autoscaler.kubernetes.io/labels"] = capi.PoolLabel + "=" + byAnn
	itest.CreateMD(e, dyn, byAnn, capi.Machine{CPU: "8", Memory: "32Gi"}, 0, ann, nil)
	// No capacity annotations: the template's status.capacity says 16 CPU;
	// the pool label comes from the labels annotation alone.
	infraAnn := itest.CAPISizes(0, 3)
	infraAnn["capacity.cluster-autoscaler.kubernetes.io/labels"] = capi.PoolLabel + "=" + byInfra
	itest.CreateMD(e, dyn, byInfra, capi.Machine{CPU: "16", Memory: "64Gi"}, 0, infraAnn,
		map[string]string{"cpu": "16", "memory": "64Gi", "pods": "110"})
	badAnn := map[string]string{
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "3",
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "two",
		"capacity.cluster-autoscaler.kubernetes.io/cpu":               "8",
		"capacity.cluster-autoscaler.kubernetes.io/memory":            "32Gi",
		"capacity.cluster-autoscaler.kubernetes.io/labels":            capi.PoolLabel + "=" + byAnn,
	}
	itest.CreateMD(e, dyn, bad, capi.Machine{CPU: "8", Memory: "32Gi"}, 0, badAnn, nil)

	itest.CreatePods(e, "big", 1, "6", map[string]string{capi.PoolLabel: byAnn})
	itest.CreatePods(e, "huge", 1, "12", map[string]string{capi.PoolLabel: byInfra})
	p := itest.StartAutoscaler(t, "autoscaler", "--kubeconfig="+e.Kubeconfig, "--cloud-config="+e.Kubeconfig,
		"--namespace="+e.Namespace, "--cloud-provider=clusterapi",
		"--node-group-auto-discovery=clusterapi:namespace="+e.Namespace+",clusterName="+itest.CAPICluster,
		"--scan-interval=1s", "--v=4")
	e.Eventually(120*time.Second, "both pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	if got := itest.MDReplicas(e, dyn, byAnn); got != 1 {
		t.Errorf("replicas of %s = %d, want 1", byAnn, got)
	}
	if got := itest.MDReplicas(e, dyn, byInfra); got != 1 {
		t.Errorf("replicas of %s = %d, want 1", byInfra, got)
	}
	if got := itest.MDReplicas(e, dyn, bad); got != 0 {
		t.Errorf("replicas of the invalid group %s = %d, want 0", bad, got)
	}
	if !p.Log.Written("Skipping a Cluster API node group with invalid size annotations") || !p.Log.Written(bad) {
		t.Error("the invalid group is not logged")
	}
}

// TestClusterAPIFailedMachineIsCleanedUpAndBackedOff: the preferred group's
// infrastructure cannot create machines (its infrastructure machines report
// failureReason InsufficientResources, which Cluster API copies to the
// Machine); the autoscaler sees the failed Machine, deletes exactly it,
// backs the group off, and the pod gets a node of the other group.
func TestClusterAPIFailedMachineIsCleanedUpAndBackedOff(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	dyn := itest.StartCAPI(e)
	broken, good := framework.UniqueName("broken"), framework.UniqueName("good")
	shape := framework.UniqueName("shape")
	for _, g := range []struct {
		name string
		fail string
	}{{broken, "InsufficientResources"}, {good, ""}} {
		ann := itest.CAPISizes(0, 3)
		ann["capacity.cluster-autoscaler.kubernetes.io/cpu"] = "4"
		ann["capacity.cluster-autoscaler.kubernetes.io/memory"] = "16Gi"
		ann["capacity.cluster-autoscaler.kubernetes.io/labels"] = "shape=" + shape
		itest.CreateMD(e, dyn, g.name, capi.Machine{CPU: "4", Memory: "16Gi", Labels: map[string]string{"shape": shape},
			FailReason: g.fail}, 0, ann, nil)
	}
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(),
		itest.PriorityConfigMap(e, fmt.Sprintf("20:\n  - %s\n10:\n  - .*\n", broken)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.CreatePods(e, "web", 1, "2", map[string]string{"shape": shape})
	p := itest.StartAutoscaler(t, "autoscaler", itest.CAPIArgs(e, "--expander=priority")...)
	e.Eventually(120*time.Second, "the pod Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 1)
	})
	if got := itest.NodesPerPool(e); got[good] != 1 || got[broken] != 0 {
		t.Errorf("nodes per group = %v, want one of %s", got, good)
	}
	if !p.Log.Written(`"Node group backed off"`) || !p.Log.Written(`errorCode="InsufficientResources"`) {
		t.Error("the back-off of the broken group is not logged with its error code")
	}
	e.Eventually(60*time.Second, "the failed Machine deleted and the broken group back at 0", func(ctx context.Context) (bool, error) {
		machines, err := itest.MachinesOf(ctx, e, dyn, broken)
		return err == nil && len(machines) == 0 && itest.MDReplicas(e, dyn, broken) == 0, err
	})
}

// TestClusterAPIAtomicProvisioningRequest: an all-or-nothing request over
// two MachineDeployments is provisioned by Cluster API's controllers (both
// groups scaled up, every Machine Running); one over a group that works and
// a group whose machines all fail is rolled back: no Machine of either group
// is left and both are back at their size before the attempt.
func TestClusterAPIAtomicProvisioningRequest(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	dyn := itest.StartCAPI(e.Env)
	a, b, broken := framework.UniqueName("a"), framework.UniqueName("b"), framework.UniqueName("broken")
	for _, g := range []struct{ name, fail string }{{a, ""}, {b, ""}, {broken, "InsufficientResources"}} {
		ann := itest.CAPISizes(0, 4)
		ann["capacity.cluster-autoscaler.kubernetes.io/cpu"] = "4"
		ann["capacity.cluster-autoscaler.kubernetes.io/memory"] = "16Gi"
		ann["capacity.cluster-autoscaler.kubernetes.io/labels"] = capi.PoolLabel + "=" + g.name
		itest.CreateMD(e.Env, dyn, g.name, capi.Machine{CPU: "4", Memory: "16Gi", FailReason: g.fail}, 0, ann, nil)
	}
	// Two nodes of a and one of b, all or nothing.
	e.Request("both", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "a", Count: 2, CPU: "3", Selector: map[string]string{capi.PoolLabel: a}},
		itest.PodSet{Name: "b", Count: 1, CPU: "3", Selector: map[string]string{capi.PoolLabel: b}})
	p := itest.StartAutoscaler(t, "autoscaler", itest.CAPIArgs(e.Env, "--enable-provisioning-requests",
		"--provisioning-request-initial-backoff-time=10m", "--provisioning-request-max-backoff-time=10m")...)
	e.Condition("both", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 120*time.Second)
	for g, want := range map[string]int{a: 2, b: 1} {
		machines, err := itest.MachinesOf(e.Context(), e.Env, dyn, g)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, m := range machines {
			if phase, _, _ := unstructured.NestedString(m.Object, "status", "phase"); phase == "Running" {
				running++
			}
		}
		if running != want || itest.MDReplicas(e.Env, dyn, g) != int64(want) {
			t.Errorf("group %s: %d Machines Running, replicas %d; want %d", g, running, itest.MDReplicas(e.Env, dyn, g), want)
		}
	}

	// One more node of b and one of broken: broken's Machine fails, so b's
	// new Machine is rolled back too.
	e.Request("doomed", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "b", Count: 1, CPU: "3", Selector: map[string]string{capi.PoolLabel: b}},
		itest.PodSet{Name: "broken", Count: 1, CPU: "3", Selector: map[string]string{capi.PoolLabel: broken}})
	e.Condition("doomed", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 120*time.Second)
	e.Eventually(120*time.Second, "the doomed attempt's Machines gone", func(ctx context.Context) (bool, error) {
		mb, err := itest.MachinesOf(ctx, e.Env, dyn, b)
		if err != nil {
			return false, err
		}
		mx, err := itest.MachinesOf(ctx, e.Env, dyn, broken)
		return len(mb) == 1 && len(mx) == 0 && itest.MDReplicas(e.Env, dyn, b) == 1 && itest.MDReplicas(e.Env, dyn, broken) == 0, err
	})
	if !p.Log.Written("Deleted instance of a rolled back all-or-nothing scale-up") {
		t.Error("the rolled back instances are not logged by name")
	}
	// The first request's capacity was not touched.
	if got := itest.NodesPerPool(e.Env); got[a] != 2 || got[b] != 1 {
		t.Errorf("nodes per group after the rollback = %v, want 2 of %s and 1 of %s", got, a, b)
	}
}
