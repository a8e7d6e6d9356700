package itest

import (
	"context"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/localcluster"
)

// PartitionNode makes a node look cut off from the control plane: kwok no
// longer plays its kubelet, its Ready condition turns False, and its pods
// keep their last status (Running, as on a machine that still runs them) and
// are never confirmed deleted (localcluster.UnreachablePodLabel) until they
// are force-deleted or the pod garbage collector removes them with the Node.
func PartitionNode(e *framework.Env, name string) {
	e.T.Helper()
	pods, err := e.Client.CoreV1().Pods("").List(e.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		e.T.Fatal(err)
	}
	label := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, localcluster.UnreachablePodLabel)
	for _, p := range pods.Items {
		if _, err := e.Client.CoreV1().Pods(p.Namespace).Patch(e.Context(), p.Name, types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
			e.T.Fatal(err)
		}
	}
	patch := []byte(`{"metadata":{"annotations":{"kwok.x-k8s.io/node":null}}}`)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.T.Fatal(err)
	}
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	for i, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			n.Status.Conditions[i] = apiv1.NodeCondition{Type: apiv1.NodeReady, Status: apiv1.ConditionFalse,
				Reason: "Partitioned", Message: "test: the node cannot reach the control plane", LastTransitionTime: metav1.Now(),
				LastHeartbeatTime: metav1.Now()}
		}
	}
	if _, err := e.Client.CoreV1().Nodes().UpdateStatus(e.Context(), n, metav1.UpdateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// NodeEvents lists the reasons of the events recorded on node.
func NodeEvents(ctx context.Context, e *framework.Env, node string) (map[string]string, error) {
	list, err := e.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, ev := range list.Items {
		out[ev.Reason] = ev.Message
	}
	return out, nil
}
