package scaleup

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestSchedulerBindsPodToKwokNode checks the local control plane end to end:
// kwok makes a new node Ready, the controller manager lifts its not-ready
// taint, kube-scheduler binds a pod that fits only there, and kwok runs it.
func TestSchedulerBindsPodToKwokNode(t *testing.T) {
	e := framework.New(t)
	nodeName := framework.UniqueName("kwok-node")
	e.CreateNode(framework.MakeNode(nodeName).Label("pool", e.Namespace).Obj())

	e.Eventually(30*time.Second, "node becomes Ready", func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == apiv1.NodeReady && c.Status == apiv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})

	pod := framework.MakePod(e.Namespace, "p").Req("500m", "1Gi").NodeSelector("pool", e.Namespace).Obj()
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "pod bound to the kwok node and Running", func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" && p.Spec.NodeName != nodeName {
			t.Fatalf("pod bound to %s, want %s", p.Spec.NodeName, nodeName)
		}
		return p.Spec.NodeName == nodeName && p.Status.Phase == apiv1.PodRunning, nil
	})
}
