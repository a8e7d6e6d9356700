package framework

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type nodeBuilder struct{ n *apiv1.Node }

func makeNode(name, cpu string) *nodeBuilder {
	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse("16Gi"),
		apiv1.ResourcePods: resource.MustParse("110")}
	return &nodeBuilder{&apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: apiv1.NodeStatus{Capacity: rl, Allocatable: rl,
			Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}},
	}}
}

func (b *nodeBuilder) label(k, v string) *nodeBuilder { b.n.Labels[k] = v; return b }
func (b *nodeBuilder) taint(k string) *nodeBuilder {
	b.n.Spec.Taints = append(b.n.Spec.Taints, apiv1.Taint{Key: k, Effect: apiv1.TaintEffectNoSchedule})
	return b
}
func (b *nodeBuilder) obj() *apiv1.Node { return b.n }

type podBuilder struct{ p *apiv1.Pod }

func makePod(name, cpu string) *podBuilder {
	return &podBuilder{&apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c",
			Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}}
}

func (b *podBuilder) on(node string) *podBuilder    { b.p.Spec.NodeName = node; return b }
func (b *podBuilder) label(k, v string) *podBuilder { b.p.Labels[k] = v; return b }
func (b *podBuilder) selector(k, v string) *podBuilder {
	b.p.Spec.NodeSelector = map[string]string{k: v}
	return b
}
func (b *podBuilder) tolerate(k string) *podBuilder {
	b.p.Spec.Tolerations = append(b.p.Spec.Tolerations, apiv1.Toleration{Key: k, Operator: apiv1.TolerationOpExists})
	return b
}
func (b *podBuilder) hostPort(port int32) *podBuilder {
	b.p.Spec.Containers[0].Ports = []apiv1.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: apiv1.ProtocolTCP}}
	return b
}
func (b *podBuilder) antiAffinity(k, v string) *podBuilder {
	b.p.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}},
			TopologyKey:   "kubernetes.io/hostname",
		}}}}
	return b
}
func (b *podBuilder) obj() *apiv1.Pod { return b.p }
