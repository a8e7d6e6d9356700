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
	"k8s.io/apimachinery/pkg/util/intstr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// objectEvents lists "Type Reason message" of the events on one object.
func objectEvents(ctx context.Context, e *framework.Env, namespace, kind, name string) ([]string, error) {
	list, err := e.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Type+" "+ev.Reason+" "+ev.Message)
	}
	return out, nil
}

// TestEvictionFailureEvents: the pod to move is covered by two PDBs, each
// allowing a disruption, so the planner picks its node, but the Eviction API
// refuses a pod with more than one PDB. The pod gets upstream's Warning
// ScaleDownFailed "failed to delete pod for ScaleDown", the node ScaleDown
// when it is tainted and ScaleDownFailed when the drain is given up, and the
// node is untainted and kept.
func TestEvictionFailureEvents(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("evfail")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	itest.GroupNode(e, group, group+"-a", nil)
	itest.ReplicaSet(e, "twopdb", group, 1, "1", false)
	// The PDBs come once the pod is ready: the disruption controller
	// re-counts only one of a pod's PDBs when the pod changes.
	var stuck string
	e.Eventually(60*time.Second, "the pod Running and Ready", func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=twopdb"})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeName == "" {
			return false, err
		}
		stuck = pods.Items[0].Name
		for _, c := range pods.Items[0].Status.Conditions {
			if c.Type == apiv1.PodReady && c.Status == apiv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	one := intstr.FromInt32(1)
	for _, name := range []string{"twopdb-1", "twopdb-2"} {
		if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(), &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "twopdb"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(60*time.Second, "both PDBs allowing a disruption", func(ctx context.Context) (bool, error) {
		pdbs, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		allowing := 0
		for _, p := range pdbs.Items {
			if p.Status.DisruptionsAllowed == 1 {
				allowing++
			}
		}
		return allowing == 2, nil
	})
	// Somewhere to move it, kept by its annotation.
	itest.GroupNode(e, group, group+"-b", map[string]string{"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"})
	// b may not be ready at the first loop: a is then unremovable for
	// --unremovable-node-recheck-timeout.
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--max-pod-eviction-time=2s", "--unremovable-node-recheck-timeout=5s")...)

	e.Eventually(90*time.Second, "ScaleDownFailed on the pod", func(ctx context.Context) (bool, error) {
		events, err := objectEvents(ctx, e, e.Namespace, "Pod", stuck)
		return err == nil && slices.Contains(events, "Warning ScaleDownFailed failed to delete pod for ScaleDown"), err
	})
	e.Eventually(30*time.Second, "ScaleDown and ScaleDownFailed on the node", func(ctx context.Context) (bool, error) {
		events, err := objectEvents(ctx, e, "default", "Node", group+"-a")
		if err != nil {
			return false, err
		}
		failed := false
		for _, ev := range events {
			failed = failed || strings.HasPrefix(ev, "Warning ScaleDownFailed failed to drain and delete node: ")
		}
		return failed && slices.Contains(events, "Normal ScaleDown marked the node as toBeDeleted/unschedulable"), nil
	})
	e.Eventually(10*time.Second, "node a untainted", func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, group+"-a", metav1.GetOptions{})
		return err == nil && !itest.HasTaintKey(n, "ToBeDeletedByClusterAutoscaler"), err
	})
}
