package testbuild

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeBuilder builds a Node; each method changes it and returns the builder.
type NodeBuilder struct{ n *apiv1.Node }

// Node starts a Ready node with the hostname label, no taints and no
// capacity (see Resources).
func Node(name string) *NodeBuilder {
	return &NodeBuilder{&apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apiv1.LabelHostname: name}},
		Status: apiv1.NodeStatus{
			Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}},
	}}
}

// Obj returns the node.
func (b *NodeBuilder) Obj() *apiv1.Node { return b.n }

// Resources sets capacity and allocatable to cpu, memory and pods.
func (b *NodeBuilder) Resources(cpu, memory, pods string) *NodeBuilder {
	rl := Resources(cpu, memory)
	rl[apiv1.ResourcePods] = resource.MustParse(pods)
	b.n.Status.Capacity, b.n.Status.Allocatable = rl, rl.DeepCopy()
	return b
}

// Capacity sets the capacity to cpu and memory (allocatable unchanged).
func (b *NodeBuilder) Capacity(cpu, memory string) *NodeBuilder {
	b.n.Status.Capacity = Resources(cpu, memory)
	return b
}

// Allocatable sets allocatable to cpu and memory (capacity unchanged).
func (b *NodeBuilder) Allocatable(cpu, memory string) *NodeBuilder {
	b.n.Status.Allocatable = Resources(cpu, memory)
	return b
}

// Label sets a label.
func (b *NodeBuilder) Label(k, v string) *NodeBuilder { b.n.Labels[k] = v; return b }

// Taint adds a NoSchedule taint with key k.
func (b *NodeBuilder) Taint(k string) *NodeBuilder {
	b.n.Spec.Taints = append(b.n.Spec.Taints, apiv1.Taint{Key: k, Effect: apiv1.TaintEffectNoSchedule})
	return b
}

// NotReady turns the Ready condition to False.
func (b *NodeBuilder) NotReady() *NodeBuilder {
	b.n.Status.Conditions[0].Status = apiv1.ConditionFalse
	return b
}
