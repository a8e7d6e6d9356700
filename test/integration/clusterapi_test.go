package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// startCAPI installs Cluster API's CRDs (from the module cache) and runs the
// test-only stand-in for Cluster API's controllers in the test's namespace.
func startCAPI(e *framework.Env) dynamic.Interface {
	e.T.Helper()
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		e.T.Fatal(err)
	}
	dir, err := capi.CRDDir(e.Context())
	if err != nil {
		e.T.Fatal(err)
	}
	if err := capi.InstallCRDs(e.Context(), dyn, dir); err != nil {
		e.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Context())
	done := make(chan struct{})
	e.T.Cleanup(func() { cancel(); <-done })
	rec := capi.NewReconciler(dyn, e.Client, e.Namespace, map[string]string{framework.TestNamespaceLabel: e.Namespace})
	go func() {
		defer close(done)
		rec.Run(ctx, 200*time.Millisecond, func(err error) { e.T.Logf("capi reconciler: %v", err) })
	}()
	return dyn
}

func mdReplicas(e *framework.Env, dyn dynamic.Interface, name string) int64 {
	e.T.Helper()
	md, err := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace).Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
	return n
}

func poolNodes(ctx context.Context, e *framework.Env, pool string) (map[string]bool, error) {
	list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: capi.PoolLabel + "=" + pool})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range list.Items {
		out[n.Name] = true
	}
	return out, nil
}

// TestClusterAPIScalesMachineDeployment: the real binary with
// --cloud-provider=clusterapi scales an annotated MachineDeployment up for
// pending pods, which run on the Machines' nodes; when one node empties,
// scale-down marks exactly that node's Machine and lowers the replicas, and
// the (stand-in) MachineSet controller removes that Machine, not another.
func TestClusterAPIScalesMachineDeployment(t *testing.T) {
	e := framework.New(t)
	dumpPods(e)
	dyn := startCAPI(e)
	md := framework.UniqueName("md")
	obj := capi.MachineDeployment(e.Namespace, md, 1, map[string]string{
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
	})
	if _, err := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace).Create(e.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the MachineDeployment's first node", func(ctx context.Context) (bool, error) {
		nodes, err := poolNodes(ctx, e, md)
		return len(nodes) == 1, err
	})

	createPods(e, "web", 3, "3", map[string]string{capi.PoolLabel: md}) // one 4-CPU node each
	p := startAutoscaler(t, "autoscaler", "--kubeconfig="+e.Kubeconfig, "--namespace="+e.Namespace,
		"--cloud-provider=clusterapi", "--node-group-auto-discovery=clusterapi:namespace="+e.Namespace,
		"--scan-interval=1s", "--v=4", "--scale-down-unneeded-time=5s", "--scale-down-delay-after-add=0s")
	e.Eventually(90*time.Second, "all 3 pods Running", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 3)
	})
	if got := mdReplicas(e, dyn, md); got != 3 {
		t.Fatalf("MachineDeployment replicas = %d after the scale-up, want 3", got)
	}
	if !p.log.Contains("Scaled Cluster API node group up") {
		t.Error("no scale-up of the Cluster API group logged")
	}

	// Empty one node: its Machine, and only it, goes.
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Context(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	victim := pod.Spec.NodeName
	before, err := poolNodes(e.Context(), e, md)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.CoreV1().Pods(e.Namespace).Delete(e.Context(), "web-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "node "+victim+" removed", func(ctx context.Context) (bool, error) {
		nodes, err := poolNodes(ctx, e, md)
		return err == nil && len(nodes) == 2 && !nodes[victim], err
	})
	after, err := poolNodes(e.Context(), e, md)
	if err != nil {
		t.Fatal(err)
	}
	for n := range before {
		if n != victim && !after[n] {
			t.Errorf("node %s was removed, only %s should have been", n, victim)
		}
	}
	if got := mdReplicas(e, dyn, md); got != 2 {
		t.Errorf("MachineDeployment replicas = %d after the scale-down, want 2", got)
	}
	machines, err := dyn.Resource(capi.GVR("machines")).Namespace(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		if m.GetName() == victim {
			t.Errorf("Machine %s of the removed node still exists", victim)
		}
		if _, marked := m.GetAnnotations()[capi.DeleteMachineAnnotation]; marked {
			t.Errorf("Machine %s was marked for deletion but is not the removed node's", m.GetName())
		}
	}
	if !strings.Contains(p.log.String(), `"Marked a Cluster API Machine for deletion"`) ||
		!strings.Contains(p.log.String(), e.Namespace+"/"+victim) {
		t.Error("the marking of the victim's Machine is not logged")
	}
	var running int
	pods, _ := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{})
	for _, p := range pods.Items {
		if p.Status.Phase == apiv1.PodRunning {
			running++
		}
	}
	if running != 2 {
		t.Errorf("%d pods Running after the scale-down, want 2", running)
	}
}

// TestClusterAPIScalesFromZero: a MachineDeployment at 0 replicas with the
// capacity annotations is scaled up for a pod that only its template fits,
// with --cloud-config naming the management cluster's kubeconfig; a group
// with invalid size annotations is logged and left alone.
func TestClusterAPIScalesFromZero(t *testing.T) {
	e := framework.New(t)
	dumpPods(e)
	dyn := startCAPI(e)
	md, bad := framework.UniqueName("zero"), framework.UniqueName("bad")
	mds := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace)
	for _, o := range []*unstructured.Unstructured{
		capi.MachineDeployment(e.Namespace, md, 0, map[string]string{
			"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
			"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3",
			"capacity.cluster-autoscaler.kubernetes.io/cpu":               "8",
			"capacity.cluster-autoscaler.kubernetes.io/memory":            "32Gi",
			"capacity.cluster-autoscaler.kubernetes.io/labels":            capi.PoolLabel + "=" + md,
		}),
		capi.MachineDeployment(e.Namespace, bad, 0, map[string]string{
			"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "3",
			"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "two",
			"capacity.cluster-autoscaler.kubernetes.io/cpu":               "8",
			"capacity.cluster-autoscaler.kubernetes.io/memory":            "32Gi",
			"capacity.cluster-autoscaler.kubernetes.io/labels":            capi.PoolLabel + "=" + md,
		}),
	} {
		if _, err := mds.Create(e.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createPods(e, "big", 1, "6", map[string]string{capi.PoolLabel: md})
	p := startAutoscaler(t, "autoscaler", "--kubeconfig="+e.Kubeconfig, "--cloud-config="+e.Kubeconfig,
		"--namespace="+e.Namespace, "--cloud-provider=clusterapi",
		"--node-group-auto-discovery=clusterapi:namespace="+e.Namespace+",clusterName=test",
		"--scan-interval=1s", "--v=4")
	e.Eventually(90*time.Second, "the pod Running", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 1)
	})
	if got := mdReplicas(e, dyn, md); got != 1 {
		t.Errorf("replicas of %s = %d, want 1", md, got)
	}
	if got := mdReplicas(e, dyn, bad); got != 0 {
		t.Errorf("replicas of the invalid group %s = %d, want 0", bad, got)
	}
	if !p.log.Contains("Skipping a Cluster API node group with invalid size annotations") || !p.log.Contains(bad) {
		t.Error("the invalid group is not logged")
	}
}
