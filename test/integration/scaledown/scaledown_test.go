package scaledown

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestUnderutilizedNodeIsDrainedAndRemoved: two nodes each run one pod of a
// ReplicaSet; one node is drained through evictions, kube-scheduler puts the
// recreated pod on the other node, and the drained node is deleted.
func TestUnderutilizedNodeIsDrainedAndRemoved(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("sd")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	// One pod on a, then b comes and the second pod goes to the emptier b.
	itest.GroupNode(e, group, group+"-a", nil)
	rs := itest.ReplicaSet(e, "web", group, 1, "1", false)
	e.Eventually(30*time.Second, "the first web pod Running", func(ctx context.Context) (bool, error) {
		running, _, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 1, err
	})
	itest.GroupNode(e, group, group+"-b", nil)
	time.Sleep(2 * time.Second) // b Ready
	patch := []byte(`{"spec":{"replicas":2}}`)
	if _, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Patch(e.Context(), rs.Name, types.MergePatchType, patch,
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "one web pod on each node", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 2 && len(nodes) == 2, err
	})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path)...)
	e.Eventually(60*time.Second, "one node left, both pods on it", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 2 && len(nodes) == 1 && len(itest.NodeNames(e, group)) == 1 &&
			p.Log.Contains("Scaled down a node after draining it"), err
	})
	_, body, _ := p.Get(e.Context(), "/metrics")
	for _, want := range []string{`cluster_autoscaler_scaled_down_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="underutilized"} 1`,
		`cluster_autoscaler_evicted_pods_total{eviction_result="succeeded"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestNodesKeptForTheirReasons: an empty node of a plain group goes, and
// nodes kept by a PDB, the scale-down-disabled annotation, a pod with local
// storage, the group's min size and a ProvisioningRequest's booking stay,
// each with its reason in the status ConfigMap.
func TestNodesKeptForTheirReasons(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	free, pdb, disabled, local, minsize, booked := framework.UniqueName("free"), framework.UniqueName("pdb"),
		framework.UniqueName("disabled"), framework.UniqueName("local"), framework.UniqueName("minsize"), framework.UniqueName("booked")
	path := itest.GroupsConfig(e.Env, free, pdb, disabled, local, minsize+":1", booked)
	itest.GroupNode(e.Env, free, free+"-n", nil)
	itest.GroupNode(e.Env, pdb, pdb+"-n", nil)
	itest.GroupNode(e.Env, disabled, disabled+"-n", map[string]string{"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"})
	itest.GroupNode(e.Env, local, local+"-n", nil)
	itest.GroupNode(e.Env, minsize, minsize+"-n", nil)
	itest.GroupNode(e.Env, booked, booked+"-n", nil)
	itest.DumpPods(e.Env)
	e.DumpRequests()
	itest.ReplicaSet(e.Env, "guarded", pdb, 1, "500m", false)
	zero := intstr.FromInt32(0)
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.ReplicaSet(e.Env, "scratch", local, 1, "500m", true)
	e.Eventually(30*time.Second, "the two pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e.Env, 2)
	})
	e.Request("hold", provreq.ClassCheckCapacity, nil, false, itest.PodSet{Name: "main", Count: 1, CPU: "1",
		Selector: map[string]string{"pool": booked}})

	// Each loop re-simulates the blocked nodes, so that the status keeps
	// their reason rather than RecentlyUnremovable.
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e.Env, path, "--enable-provisioning-requests",
		"--unremovable-node-recheck-timeout=0s")...)
	e.Condition("hold", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, 30*time.Second)
	e.Eventually(60*time.Second, "the free node removed", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e.Env, free)) == 0, nil
	})
	time.Sleep(4 * time.Second) // more loops past the unneeded time
	want := map[string]string{pdb + "-n": "BlockedByPod", disabled + "-n": "ScaleDownDisabledAnnotation",
		local + "-n": "BlockedByPod", minsize + "-n": "NodeGroupMinSizeReached", booked + "-n": "BookedCapacity"}
	for node := range want {
		if _, err := e.Client.CoreV1().Nodes().Get(e.Context(), node, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s: %v, want it kept", node, err)
		}
	}
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(e.Context(), "cluster-autoscaler-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []clusterstate.UnremovableNode
	if err := yaml.Unmarshal([]byte(cm.Data[clusterstate.UnremovableDataKey]), &kept); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range kept {
		got[u.Name] = u.Reason
	}
	for node, reason := range want {
		if got[node] != reason {
			t.Errorf("status says %s is unremovable for %q, want %q", node, got[node], reason)
		}
	}
	if !p.Log.Written("Scaled down an empty node") {
		t.Error("the empty node's removal is not logged")
	}
}

// TestFailedDrainUntaintsTheNode: the pod to move has a finalizer, so it
// never leaves after its eviction; the drain gives up after the grace
// period, the node is untainted and kept, and ScaleDownFailed says why.
func TestFailedDrainUntaintsTheNode(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("stuck")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	itest.GroupNode(e, group, group+"-a", nil)
	itest.ReplicaSet(e, "sticky", group, 1, "1", false)
	e.Eventually(30*time.Second, "the pod Running", func(ctx context.Context) (bool, error) {
		running, _, err := itest.PodsOf(ctx, e, "sticky")
		return err == nil && running == 1, err
	})
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{LabelSelector: "app=sticky"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v", err)
	}
	stuck := pods.Items[0].Name
	finalize := []byte(`{"metadata":{"finalizers":["test.autoscaler/hold"]}}`)
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Patch(e.Context(), stuck, types.MergePatchType, finalize,
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release := []byte(`{"metadata":{"finalizers":null}}`)
		_, _ = e.Client.CoreV1().Pods(e.Namespace).Patch(context.Background(), stuck, types.MergePatchType, release, metav1.PatchOptions{})
	})
	// Somewhere to move it, kept by its annotation.
	itest.GroupNode(e, group, group+"-b", map[string]string{"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"})
	time.Sleep(2 * time.Second)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--max-graceful-termination-sec=1")...)
	e.Eventually(60*time.Second, "ScaleDownFailed on node a", func(ctx context.Context) (bool, error) {
		events, err := e.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + group + "-a"})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == "ScaleDownFailed" {
				return true, nil
			}
		}
		return false, nil
	})
	e.Eventually(10*time.Second, "node a untainted", func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, group+"-a", metav1.GetOptions{})
		return err == nil && !itest.HasTaintKey(n, "ToBeDeletedByClusterAutoscaler"), err
	})
	if !p.Log.Written("Scale-down of a node failed") {
		t.Error("the failed scale-down is not logged")
	}
}

// TestStaleDeletionTaintIsRemovedAtStart: a ToBeDeleted taint left by a
// previous run on a node of a managed group is removed at start-up.
func TestStaleDeletionTaintIsRemovedAtStart(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("stale")
	path := itest.GroupsConfig(e, group)
	n := framework.MakeNode(group+"-n").Label("pool", group).Obj()
	n.Annotations[kwok.NodeGroupAnnotation] = group
	n.Annotations["cluster-autoscaler.kubernetes.io/scale-down-disabled"] = "true"
	n.Spec.ProviderID = kwok.ProviderIDPrefix + n.Name
	n.Spec.Taints = []apiv1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Value: "1700000000", Effect: apiv1.TaintEffectNoSchedule}}
	e.CreateNode(n)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path)...)
	e.Eventually(30*time.Second, "the stale taint removed", func(ctx context.Context) (bool, error) {
		cur, err := e.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil && !itest.HasTaintKey(cur, "ToBeDeletedByClusterAutoscaler"), err
	})
	if !p.Log.Written("Removed a deletion taint left by a previous run") {
		t.Error("the clean-up is not logged")
	}
	e.Eventually(30*time.Second, "upstream's ClusterAutoscalerCleanup event on the node", func(ctx context.Context) (bool, error) {
		events, err := objectEvents(ctx, e, "default", "Node", n.Name)
		return err == nil && slices.Contains(events, "Normal ClusterAutoscalerCleanup removed ToBeDeletedByClusterAutoscaler taint from node "+n.Name), err
	})
}
