package template

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/taints"
)

func daemonSet(name string, selector map[string]string, tolerations ...apiv1.Toleration) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID("uid-" + name)},
		Spec: appsv1.DaemonSetSpec{Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{NodeSelector: selector,
			Tolerations: tolerations, Containers: []apiv1.Container{{Name: "c"}}}}}}
}

func TestFromNode(t *testing.T) {
	yes := true
	node := &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "real-1", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"pool": "a", apiv1.LabelHostname: "real-1"}},
		Spec: apiv1.NodeSpec{ProviderID: "kwok://real-1", Unschedulable: true, Taints: []apiv1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: apiv1.TaintEffectNoSchedule},
			{Key: apiv1.TaintNodeNotReady, Effect: apiv1.TaintEffectNoExecute},
			{Key: "ToBeDeletedByClusterAutoscaler", Effect: apiv1.TaintEffectNoSchedule},
			{Key: taints.Disruption, Effect: apiv1.TaintEffectNoSchedule},
			{Key: taints.ConsolidationCandidate, Effect: apiv1.TaintEffectPreferNoSchedule},
			{Key: taints.StartupPrefix + "cni", Effect: apiv1.TaintEffectNoSchedule},
			{Key: "example.com/booting", Effect: apiv1.TaintEffectNoSchedule},
		}},
		Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionFalse}}},
	}
	onNode := []*apiv1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "logs-x", OwnerReferences: []metav1.OwnerReference{
			{Kind: "DaemonSet", UID: "uid-logs", Controller: &yes}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "static", Annotations: map[string]string{"kubernetes.io/config.mirror": "x"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web", OwnerReferences: []metav1.OwnerReference{
			{Kind: "ReplicaSet", UID: "rs", Controller: &yes}}}},
	}
	tolerateGPU := apiv1.Toleration{Key: "dedicated", Operator: apiv1.TolerationOpExists}
	daemonSets := []*appsv1.DaemonSet{
		daemonSet("logs", nil, tolerateGPU),                              // already on the node
		daemonSet("metrics", nil, tolerateGPU),                           // missing: added
		daemonSet("other-pool", map[string]string{"pool": "b"}),          // selector does not match
		daemonSet("no-toleration", nil),                                  // taint not tolerated
		daemonSet("pool-a", map[string]string{"pool": "a"}, tolerateGPU), // matches
	}
	info := Sanitizer{DropTaints: []string{"example.com/booting"}}.FromNode("g", node, onNode, daemonSets)
	n := info.Node
	if n.Name != "template-node-for-g" || n.Labels[apiv1.LabelHostname] != n.Name || n.Spec.ProviderID != "" ||
		n.ResourceVersion != "" || n.Spec.Unschedulable {
		t.Errorf("template identity not sanitised: %+v", n.ObjectMeta)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints = %v, want only dedicated", n.Spec.Taints)
	}
	if len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Status != apiv1.ConditionTrue {
		t.Errorf("conditions = %v, want Ready", n.Status.Conditions)
	}
	var names []string
	for _, p := range info.Pods {
		names = append(names, p.Name)
	}
	want := []string{"logs-x", "static", "metrics-template-node-for-g", "pool-a-template-node-for-g"}
	if len(names) != len(want) {
		t.Fatalf("pods = %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("pods = %v, want %v", names, want)
			break
		}
	}
	if node.Name != "real-1" || len(node.Spec.Taints) != 7 {
		t.Error("the real node was modified")
	}
}

// TestTemplateUnschedulable: a provider template's spec.unschedulable is
// kept (the group is not scaled up, as upstream) unless
// --scale-from-unschedulable.
func TestTemplateUnschedulable(t *testing.T) {
	info := &cloudprovider.NodeInfo{Node: &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec: apiv1.NodeSpec{Unschedulable: true}}}
	if got := (Sanitizer{}).Template(info); !got.Node.Spec.Unschedulable {
		t.Error("spec.unschedulable dropped without --scale-from-unschedulable")
	}
	got := (Sanitizer{ScaleFromUnschedulable: true}).Template(info)
	if got.Node.Spec.Unschedulable {
		t.Error("spec.unschedulable kept with --scale-from-unschedulable")
	}
	if !info.Node.Spec.Unschedulable {
		t.Error("the provider's template was modified")
	}
}
