package framework

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeBuilder builds a kwok-managed Node fluently: MakeNode("n").CPU("4").Obj().
type NodeBuilder struct{ node *apiv1.Node }

// MakeNode starts a node with 4 CPU, 16Gi and 110 pods.
func MakeNode(name string) *NodeBuilder {
	n := &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"kubernetes.io/hostname": name, "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
	}
	b := &NodeBuilder{node: n}
	return b.Resources("4", "16Gi", "110")
}

// Resources sets capacity and allocatable.
func (b *NodeBuilder) Resources(cpu, memory, pods string) *NodeBuilder {
	rl := apiv1.ResourceList{
		apiv1.ResourceCPU:    resource.MustParse(cpu),
		apiv1.ResourceMemory: resource.MustParse(memory),
		apiv1.ResourcePods:   resource.MustParse(pods),
	}
	b.node.Status.Capacity, b.node.Status.Allocatable = rl, rl.DeepCopy()
	return b
}

// Label adds a label.
func (b *NodeBuilder) Label(k, v string) *NodeBuilder { b.node.Labels[k] = v; return b }

// Obj returns the node.
func (b *NodeBuilder) Obj() *apiv1.Node { return b.node }

// PodBuilder builds a Pod fluently: MakePod("ns", "p").CPU("100m").Obj().
type PodBuilder struct{ pod *apiv1.Pod }

// MakePod starts a pod with one container and no requests.
func MakePod(namespace, name string) *PodBuilder {
	return &PodBuilder{pod: &apiv1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Image: "fake"}}},
	}}
}

// Req sets the container's cpu and memory requests.
func (b *PodBuilder) Req(cpu, memory string) *PodBuilder {
	b.pod.Spec.Containers[0].Resources.Requests = apiv1.ResourceList{
		apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse(memory),
	}
	return b
}

// NodeSelector adds a nodeSelector entry.
func (b *PodBuilder) NodeSelector(k, v string) *PodBuilder {
	if b.pod.Spec.NodeSelector == nil {
		b.pod.Spec.NodeSelector = map[string]string{}
	}
	b.pod.Spec.NodeSelector[k] = v
	return b
}

// Obj returns the pod.
func (b *PodBuilder) Obj() *apiv1.Pod { return b.pod }
