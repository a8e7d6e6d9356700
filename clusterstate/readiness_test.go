package clusterstate

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeReadiness(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := func(age time.Duration, ready bool, taints ...string) *apiv1.Node {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		status := apiv1.ConditionFalse
		if ready {
			status = apiv1.ConditionTrue
		}
		n.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: status}}
		for _, k := range taints {
			n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: k, Effect: apiv1.TaintEffectNoSchedule})
		}
		return n
	}
	for _, tc := range []struct {
		name string
		node *apiv1.Node
		want Readiness
	}{
		{"ready", node(time.Hour, true), Ready},
		{"ready with an unrelated taint", node(time.Hour, true, "dedicated"), Ready},
		{"young, not ready", node(time.Minute, false), NotStarted},
		{"old, not ready", node(time.Hour, false), Unready},
		{"ready condition but the not-ready taint still on", node(10*time.Second, true, "node.kubernetes.io/not-ready"), NotStarted},
		{"uninitialized by the cloud controller", node(10*time.Second, true, "node.cloudprovider.kubernetes.io/uninitialized"), NotStarted},
		{"unreachable for long", node(time.Hour, true, "node.kubernetes.io/unreachable"), Unready},
	} {
		if got := NodeReadiness(tc.node, now, 15*time.Minute); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
