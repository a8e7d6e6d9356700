package aws

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestAWSCapacityBlockExtendedMidDrainKeepsItsNode: a Capacity Block ends
// 60 s after the start and its node's drain begins 30 s before that, held
// by a PodDisruptionBudget (minAvailable 1 over the one pod on the node).
// The block is then extended by an hour: once the provider has read the new
// end, the drain stops (ReservationExtended), the node is given back
// (uncordoned, not terminated) and its pod was never evicted: capacity
// that is paid for is not removed for a reason that no longer holds.
func TestAWSCapacityBlockExtendedMidDrainKeepsItsNode(t *testing.T) {
	e := framework.New(t)
	end := time.Now().Add(60 * time.Second)
	s, block, blockNode := blockWithNode(e, end)
	itest.Deployment(e, "batch", 1, map[string]string{"shape": "standard"})
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}}}}
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var podName string
	e.Eventually(60*time.Second, "the batch pod Running on the block's node, its PDB allowing no disruption", func(ctx context.Context) (bool, error) {
		on, err := appNodes(ctx, e, "batch")
		if err != nil || on[blockNode] != 1 {
			return false, err
		}
		list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=batch"})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		podName = list.Items[0].Name
		got, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Get(ctx, "batch", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 1 &&
			got.Status.DisruptionsAllowed == 0, err
	})
	if time.Until(end) < 35*time.Second {
		t.Fatalf("setup took too long: the block ends in %v", time.Until(end))
	}
	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, "--nodes=0:5:block", "--nodes=0:5:ordinary",
		"--aws-capacity-block-drain-before=30s", "--max-pod-eviction-time=10m", "--scale-down-enabled=false")...)
	e.Eventually(time.Until(end)+10*time.Second, "the block's node cordoned for its drain", func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, blockNode, metav1.GetOptions{})
		return err == nil && n.Spec.Unschedulable && p.Log.Contains("reservationending"), err
	})
	if !s.ExtendCapacityReservation(block, time.Now().Add(time.Hour)) {
		t.Fatal("no such reservation")
	}
	extended := time.Now()
	// The provider reads reservations at least every list interval (1 min).
	e.Eventually(90*time.Second, "the drain stopped (event DisruptionCancelled: ReservationExtended) and the node given back", func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, blockNode, metav1.GetOptions{})
		if err != nil || n.Spec.Unschedulable {
			return false, err
		}
		evs, err := e.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + blockNode + ",reason=DisruptionCancelled"})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, "ReservationExtended") {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("figures: node given back %v after the extension", time.Since(extended).Round(time.Second))
	// Some loops more: the node is not proposed again, nothing is deleted.
	time.Sleep(5 * time.Second)
	if slices.Contains(s.Terminated(), blockNode) {
		t.Error("the block's instance was terminated after its block was extended")
	}
	if n, err := e.Client.CoreV1().Nodes().Get(e.Context(), blockNode, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Errorf("the node after the extension: err %v, cordoned again %v", err, err == nil && n.Spec.Unschedulable)
	}
	got, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Context(), podName, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil || got.Spec.NodeName != blockNode {
		t.Errorf("the batch pod %s: err %v; want it still on %s, never evicted", podName, err, blockNode)
	}
	if st := s.GroupState("block"); st.Desired != 1 {
		t.Errorf("block group's desired capacity %d, want 1", st.Desired)
	}
}
