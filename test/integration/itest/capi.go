package itest

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// CAPICluster is the name of the Cluster every Cluster API test creates in
// its namespace.
const CAPICluster = "test"

// Size annotations of a node group (upstream's keys).
func CAPISizes(min, max int) map[string]string {
	return map[string]string{
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": fmt.Sprint(min),
		"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": fmt.Sprint(max),
	}
}

// StartCAPI installs Cluster API's CRDs (from the module cache) and the test
// provider's, creates the Cluster CAPICluster in the test's namespace (its
// workload cluster is the test cluster itself), and runs Cluster API's core
// controller manager and the test provider's controller for that namespace.
func StartCAPI(e *framework.Env) dynamic.Interface {
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
	if err := capi.CreateCluster(e.Context(), dyn, e.Client, e.Namespace, CAPICluster, e.Kubeconfig); err != nil {
		e.T.Fatal(err)
	}
	// Runs after the manager has stopped (cleanups run last-in first-out):
	// its finalizers would otherwise keep the namespace from going.
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := capi.ReleaseNamespace(ctx, dyn, e.Namespace); err != nil {
			e.T.Logf("removing Cluster API finalizers: %v", err)
		}
	})
	ctx, cancel := context.WithCancel(e.Context())
	done := make(chan struct{})
	e.T.Cleanup(func() { cancel(); <-done })
	infra := capi.NewInfra(dyn, e.Client, e.Namespace, map[string]string{framework.TestNamespaceLabel: e.Namespace})
	go func() {
		defer close(done)
		infra.Run(ctx, time.Second, func(err error) { e.T.Logf("test infrastructure provider: %v", err) })
	}()
	capi.StartManager(e.T, e.Kubeconfig, e.Namespace)
	e.DescribeOnTimeout(func(ctx context.Context) string { return describeCAPI(ctx, dyn, e.Namespace) })
	return dyn
}

// describeCAPI is a line for each MachineDeployment, MachineSet and
// Machine of namespace: replicas, phase, node, the conditions that are not
// True and say why, deletion.
func describeCAPI(ctx context.Context, dyn dynamic.Interface, namespace string) string {
	var b strings.Builder
	b.WriteString("Cluster API objects:")
	for _, resource := range []string{"machinedeployments", "machinesets", "machines"} {
		list, err := dyn.Resource(capi.GVR(resource)).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", resource, err)
			continue
		}
		for _, o := range list.Items {
			replicas, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			ready, _, _ := unstructured.NestedInt64(o.Object, "status", "readyReplicas")
			phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
			node, _, _ := unstructured.NestedString(o.Object, "status", "nodeRef", "name")
			fmt.Fprintf(&b, "\n  %s %s replicas=%d ready=%d phase=%q node=%q deleting=%t", resource, o.GetName(), replicas, ready,
				phase, node, o.GetDeletionTimestamp() != nil)
			conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
			for _, c := range conditions {
				m, _ := c.(map[string]any)
				if msg, _ := m["message"].(string); msg != "" && m["status"] != "True" {
					fmt.Fprintf(&b, " [%v=%v %v: %v]", m["type"], m["status"], m["reason"], m["message"])
				}
			}
		}
	}
	return b.String()
}

// CreateMD creates a TestMachineTemplate (named after the group) and a
// MachineDeployment of replicas from it.
func CreateMD(e *framework.Env, dyn dynamic.Interface, name string, m capi.Machine, replicas int64, annotations map[string]string, statusCapacity map[string]string) {
	e.T.Helper()
	if err := capi.CreateMachineTemplate(e.Context(), dyn, e.Namespace, name, m, statusCapacity); err != nil {
		e.T.Fatal(err)
	}
	md := capi.MachineDeployment(e.Namespace, CAPICluster, name, name, replicas, annotations)
	if _, err := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace).Create(e.Context(), md, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

func MDReplicas(e *framework.Env, dyn dynamic.Interface, name string) int64 {
	e.T.Helper()
	md, err := dyn.Resource(capi.GVR("machinedeployments")).Namespace(e.Namespace).Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
	return n
}

// MachinesOf lists the Machines of MachineDeployment md, by name.
func MachinesOf(ctx context.Context, e *framework.Env, dyn dynamic.Interface, md string) (map[string]*unstructured.Unstructured, error) {
	list, err := dyn.Resource(capi.GVR("machines")).Namespace(e.Namespace).List(ctx,
		metav1.ListOptions{LabelSelector: capi.DeploymentNameLabel + "=" + md})
	if err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out, nil
}

func PoolNodes(ctx context.Context, e *framework.Env, pool string) (map[string]bool, error) {
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

func CAPIArgs(e *framework.Env, extra ...string) []string {
	return append([]string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace,
		"--cloud-provider=clusterapi", "--node-group-auto-discovery=clusterapi:namespace=" + e.Namespace,
		"--scan-interval=1s", "--v=4"}, extra...)
}
