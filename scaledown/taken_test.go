package scaledown

import (
	"context"
	"errors"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// TestMarkToBeDeletedLeavesTheEnginesNodes: a node the disruption engine
// took (its taint, written after the plan's observation) is not tainted for
// scale-down, and the error says so; any other node is.
func TestMarkToBeDeletedLeavesTheEnginesNodes(t *testing.T) {
	if disruptionTaint != disruption.Taint {
		t.Fatalf("scale-down knows the engine's taint as %q, the engine writes %q", disruptionTaint, disruption.Taint)
	}
	ctx := context.Background()
	taken, free := node("taken"), node("free")
	taken.Spec.Taints = []apiv1.Taint{{Key: disruption.Taint, Value: "true", Effect: apiv1.TaintEffectNoSchedule}}
	client := fake.NewClientset(taken, free)
	taints := NewTaints(client, 10, true)
	if err := taints.MarkToBeDeleted(ctx, "taken", t0); !errors.Is(err, ErrTakenByDisruption) {
		t.Errorf("taken node: err %v, want ErrTakenByDisruption", err)
	}
	got, err := client.CoreV1().Nodes().Get(ctx, "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasTaint(got, ToBeDeletedTaint) || got.Spec.Unschedulable {
		t.Errorf("taken node changed: taints %v, unschedulable %v", got.Spec.Taints, got.Spec.Unschedulable)
	}
	if err := taints.MarkToBeDeleted(ctx, "free", t0); err != nil {
		t.Fatalf("free node: %v", err)
	}
	if got, _ := client.CoreV1().Nodes().Get(ctx, "free", metav1.GetOptions{}); !hasTaint(got, ToBeDeletedTaint) {
		t.Errorf("free node not tainted: %v", got.Spec.Taints)
	}
}
