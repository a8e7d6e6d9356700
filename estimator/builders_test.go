package estimator

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

func templateInfo(cpu string, dsPods ...*apiv1.Pod) *cloudprovider.NodeInfo {
	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse("16Gi"),
		apiv1.ResourcePods: resource.MustParse("110")}
	return &cloudprovider.NodeInfo{
		Node: &apiv1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "tmpl", Labels: map[string]string{"pool": "a"}},
			Status: apiv1.NodeStatus{Capacity: rl, Allocatable: rl,
				Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}},
		},
		Pods: dsPods,
	}
}

// pods returns n pods of one ReplicaSet ("owner") requesting cpu each.
func pods(owner string, n int, cpu string, mutate ...func(*apiv1.Pod)) []*apiv1.Pod {
	out := make([]*apiv1.Pod, n)
	yes := true
	for i := range out {
		p := &apiv1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", owner, i),
				UID: types.UID(fmt.Sprintf("%s-%d", owner, i)), Labels: map[string]string{"app": owner},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: types.UID("rs-" + owner), Controller: &yes}}},
			Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{
				Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse("100Mi")}}}}},
		}
		for _, m := range mutate {
			m(p)
		}
		out[i] = p
	}
	return out
}

func antiAffinity(p *apiv1.Pod) {
	p.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}},
			TopologyKey:   apiv1.LabelHostname,
		}}}}
}

func selector(k, v string) func(*apiv1.Pod) {
	return func(p *apiv1.Pod) { p.Spec.NodeSelector = map[string]string{k: v} }
}
