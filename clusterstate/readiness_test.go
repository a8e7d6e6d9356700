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
		if got := DefaultTaints().NodeReadiness(tc.node, now, 15*time.Minute); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeReadinessWithTaintFlags(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := func(age time.Duration, taints ...string) *apiv1.Node {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		n.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}
		for _, k := range taints {
			n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: k, Effect: apiv1.TaintEffectNoSchedule})
		}
		return n
	}
	flags := NewTaints(TaintOptions{
		StartupTaints:        []string{"example.com/agent-not-ready"},
		IgnoreTaints:         []string{"example.com/legacy-ignore"},
		StartupTaintPrefixes: []string{"boot.example.com/"},
		StatusTaints:         []string{"example.com/status", "node.kubernetes.io/unreachable"},
	})
	for _, tc := range []struct {
		name   string
		taints Taints
		node   *apiv1.Node
		want   Readiness
	}{
		{"built-in startup prefix, young", DefaultTaints(), node(time.Minute, "startup-taint.cluster-autoscaler.kubernetes.io/gpu"), NotStarted},
		{"built-in ignore prefix, young", DefaultTaints(), node(time.Minute, "ignore-taint.cluster-autoscaler.kubernetes.io/x"), NotStarted},
		{"built-in startup prefix past the startup time", DefaultTaints(), node(time.Hour, "startup-taint.cluster-autoscaler.kubernetes.io/gpu"), Unready},
		{"built-in status prefix", DefaultTaints(), node(time.Minute, "status-taint.cluster-autoscaler.kubernetes.io/degraded"), Ready},
		{"--startup-taint key without the flag", DefaultTaints(), node(time.Minute, "example.com/agent-not-ready"), Ready},
		{"--startup-taint key", flags, node(time.Minute, "example.com/agent-not-ready"), NotStarted},
		{"--ignore-taint key", flags, node(time.Minute, "example.com/legacy-ignore"), NotStarted},
		{"--startup-taint-prefix", flags, node(time.Minute, "boot.example.com/csi"), NotStarted},
		{"--status-taint key", flags, node(time.Minute, "example.com/status"), Ready},
		{"--status-taint overrides a controller taint", flags, node(time.Hour, "node.kubernetes.io/unreachable"), Ready},
		{"controller taint still starts without the flag", flags, node(time.Minute, "node.kubernetes.io/not-ready"), NotStarted},
	} {
		if got := tc.taints.NodeReadiness(tc.node, now, 15*time.Minute); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
