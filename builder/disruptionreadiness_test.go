package builder

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// TestReadinessFollowsStartupTaints: a node whose Ready condition is true
// is not ready yet for the engine while a startup taint (the controllers'
// not-ready taint, a --startup-taint) is on it, as clusterstate counts it;
// a status taint does not hold it. (Its devices: the registry's
// ResourceUnreadyNodes, covered on the control plane by
// test/integration/healing's TestExpiredDRANodeWaitsForTheReplacementsDevices.)
func TestReadinessFollowsStartupTaints(t *testing.T) {
	opts := config.Defaults()
	opts.StartupTaints = []string{"example.com/agent-starting"}
	r := NewReadiness(clusterstate.NewRegistry(ClusterStateOptions(opts)), clusterstate.NewTaints(TaintOptions(opts)))
	node := func(taints ...string) *apiv1.Node {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
			Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}}
		for _, k := range taints {
			n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: k, Effect: apiv1.TaintEffectNoSchedule})
		}
		return n
	}
	for _, tc := range []struct {
		name string
		node *apiv1.Node
		want bool
	}{
		{"ready", node(), false},
		{"not-ready taint", node("node.kubernetes.io/not-ready"), true},
		{"uninitialized", node("node.cloudprovider.kubernetes.io/uninitialized"), true},
		{"a --startup-taint", node("example.com/agent-starting"), true},
		{"a status taint", node("status-taint.cluster-autoscaler.kubernetes.io/x"), false},
	} {
		if got := r.NotReadyYet("g", tc.node); got != tc.want {
			t.Errorf("%s: not ready yet %v, want %v", tc.name, got, tc.want)
		}
	}
}
