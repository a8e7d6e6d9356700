package clusterapi

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Annotations Cluster API sets on the Nodes of the Machines it manages
// (besides NodeMachineAnnotation): the Machine's Cluster and its namespace.
const (
	NodeClusterNameAnnotation      = "cluster.x-k8s.io/cluster-name"
	NodeClusterNamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace"
)

// clusterKey names a Cluster API Cluster: its namespace and name.
type clusterKey struct{ namespace, name string }

func clusterOf(obj *unstructured.Unstructured) clusterKey {
	return clusterKey{namespace: obj.GetNamespace(), name: clusterName(obj)}
}

// scope is the autoscaler's own cluster, as far as Refresh can tell: the
// Clusters of its node groups, or, before it has any, those the discovery
// specs' namespace and clusterName keys allow. A node is matched to a
// Machine (or a group) only of these Clusters, so that a Machine of
// another Cluster of the same management cluster, with the same name, node
// name or provider ID, never stands for one of this cluster's nodes.
type scope struct {
	specs  []discoverySpec
	groups map[clusterKey]bool
}

func (sc scope) owns(c clusterKey) bool {
	if len(sc.groups) > 0 {
		return sc.groups[c]
	}
	if len(sc.specs) == 0 {
		return true
	}
	for _, d := range sc.specs {
		if (d.namespace == "" || d.namespace == c.namespace) && (d.clusterName == "" || d.clusterName == c.name) {
			return true
		}
	}
	return false
}

// machineMayBe reports whether Machine m may be node's: it is of the
// autoscaler's own cluster, and of the Cluster, the namespace and the name
// that the node's Cluster API annotations give, where it has them.
func (sc scope) machineMayBe(node *apiv1.Node, m *unstructured.Unstructured) bool {
	return sc.owns(clusterOf(m)) && nodeAgrees(node, m, true)
}

// groupMayHave reports whether node may be an instance of g (a MachinePool's
// instance without a Machine): the group's Cluster and namespace agree with
// the node's annotations.
func (sc scope) groupMayHave(node *apiv1.Node, g *NodeGroup) bool {
	return sc.owns(clusterOf(g.obj)) && nodeAgrees(node, g.obj, false)
}

// nodeAgrees reports whether the node's Cluster API annotations, those it
// has, name obj's Cluster, namespace and, for a Machine, name.
func nodeAgrees(node *apiv1.Node, obj *unstructured.Unstructured, isMachine bool) bool {
	a := node.Annotations
	if v := a[NodeClusterNameAnnotation]; v != "" && v != clusterName(obj) {
		return false
	}
	if v := a[NodeClusterNamespaceAnnotation]; v != "" && v != obj.GetNamespace() {
		return false
	}
	if v := a[NodeMachineAnnotation]; v != "" && isMachine && v != obj.GetName() {
		return false
	}
	return true
}

// only returns the one candidate that may stand for node, or nil when none
// or several may (several: the node cannot be told apart, so it is taken
// for none of them).
func only[T any](candidates []T, may func(T) bool) (T, bool) {
	var found T
	n := 0
	for _, c := range candidates {
		if may(c) {
			found = c
			n++
		}
	}
	if n != 1 {
		var zero T
		return zero, false
	}
	return found, true
}
