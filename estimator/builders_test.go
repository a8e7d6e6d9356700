package estimator

import (
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

// templateInfo is the template of pool "a": a node of cpu, 16Gi and 110 pods
// with DaemonSet pods dsPods.
func templateInfo(cpu string, dsPods ...*apiv1.Pod) *cloudprovider.NodeInfo {
	node := testbuild.Node("tmpl").Resources(cpu, "16Gi", "110").Label("pool", "a").Obj()
	return &cloudprovider.NodeInfo{Node: node, Pods: dsPods}
}

// pods returns n pods of one ReplicaSet ("owner", labelled app=<owner>)
// requesting cpu and 100Mi each, changed by mutate.
func pods(owner string, n int, cpu string, mutate ...func(*apiv1.Pod)) []*apiv1.Pod {
	out := testbuild.Pods(owner, n, func(b *testbuild.PodBuilder) { b.Label("app", owner).ReplicaSet(owner).Req(cpu, "100Mi") })
	for _, p := range out {
		for _, m := range mutate {
			m(p)
		}
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
