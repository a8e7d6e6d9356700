package clusterapi

import (
	"context"
	"errors"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// clusterMachine is a Running Machine of Cluster cluster, in MachineSet set.
func clusterMachine(ns, cluster, name, set, providerID, node string) *obj {
	return machine(ns, name, set, providerID, node).set(cluster, "spec", "clusterName")
}

func clusterSet(ns, cluster, name string) *obj {
	return makeObj(kindMachineSet, ns, name).set(cluster, "spec", "clusterName").sizes("0", "5").replicas(2)
}

// annotated is a node with the given Cluster API annotations (key, value, ...).
func annotated(n *apiv1.Node, kv ...string) *apiv1.Node {
	n.Annotations = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Annotations[kv[i]] = kv[i+1]
	}
	return n
}

// TestNodesMatchMachinesOfTheirOwnClusterOnly: a management cluster holds
// Clusters "a" and "b" (namespace "ns"), and "c" (namespace "other"). A
// node is matched to a Machine (and its group) only of the autoscaler's own
// cluster and of the Cluster, namespace and Machine its annotations name:
// a Machine of another Cluster with the node's provider ID, node name or
// Machine name never is; a node two Clusters' Machines could be is taken
// for neither.
func TestNodesMatchMachinesOfTheirOwnClusterOnly(t *testing.T) {
	ctx := context.Background()
	objs := []*obj{
		clusterSet("ns", "a", "ms-a"), clusterSet("ns", "b", "ms-b"), clusterSet("other", "c", "ms-c"),
		// The provider ID of a's node w1 is also a Machine of b's.
		clusterMachine("ns", "b", "mb1", "ms-b", "kwok://w1", ""),
		clusterMachine("ns", "a", "ma1", "ms-a", "", "w1"),
		// Node w2 of "a" has no Machine yet; "c" has a Machine whose node is named w2.
		clusterMachine("other", "c", "mc2", "ms-c", "kwok://c-w2", "w2"),
		// Machine m3 exists only in "c".
		clusterMachine("other", "c", "m3", "ms-c", "kwok://c-w3", "c-w3"),
		// Both "a" and "b" have a Machine whose node is named w4.
		clusterMachine("ns", "a", "ma4", "ms-a", "", "w4"),
		clusterMachine("ns", "b", "mb4", "ms-b", "", "w4"),
		// A node of "b" found by provider ID.
		clusterMachine("ns", "b", "mb5", "ms-b", "kwok://w5", "w5"),
	}
	clusterA := []string{NodeClusterNameAnnotation, "a", NodeClusterNamespaceAnnotation, "ns"}
	tests := []struct {
		name      string
		specs     []string
		node      *apiv1.Node
		wantGroup string
		wantHas   bool
		wantErr   error
	}{
		{name: "provider ID of another cluster's Machine", node: annotated(node("w1", "kwok://w1"), clusterA...),
			wantGroup: "MachineSet/ns/ms-a", wantHas: true},
		{name: "node name of another namespace's Machine", node: annotated(node("w2", ""), clusterA...),
			wantErr: cloudprovider.ErrNotImplemented},
		{name: "Machine name of another namespace", node: annotated(node("w3", ""), append(clusterA, NodeMachineAnnotation, "m3")...),
			wantHas: false},
		{name: "node name in two clusters, no annotations", node: node("w4", ""), wantErr: cloudprovider.ErrNotImplemented},
		{name: "node name in two clusters, annotated", node: annotated(node("w4", ""), NodeClusterNameAnnotation, "b"),
			wantGroup: "MachineSet/ns/ms-b", wantHas: true},
		{name: "own cluster by provider ID", node: node("w5", "kwok://w5"), wantGroup: "MachineSet/ns/ms-b", wantHas: true},
		{name: "configured for a: b's Machine by provider ID", specs: []string{"clusterapi:clusterName=a"},
			node: node("w5", "kwok://w5"), wantErr: cloudprovider.ErrNotImplemented},
		{name: "configured for a: c's Machine by node name", specs: []string{"clusterapi:clusterName=a"},
			node: node("w2", ""), wantErr: cloudprovider.ErrNotImplemented},
		{name: "configured for a: own Machine", specs: []string{"clusterapi:clusterName=a"},
			node: node("w4", ""), wantGroup: "MachineSet/ns/ms-a", wantHas: true},
		{name: "configured for ns: c's Machine name", specs: []string{"clusterapi:namespace=ns"},
			node: annotated(node("w3", ""), NodeMachineAnnotation, "m3"), wantHas: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newProvider(t, tc.specs, objs...)
			g, err := p.NodeGroupForNode(ctx, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if g != nil {
				got = g.Id()
			}
			if got != tc.wantGroup {
				t.Errorf("NodeGroupForNode = %q, want %q", got, tc.wantGroup)
			}
			has, err := p.HasInstance(ctx, tc.node)
			if !errors.Is(err, tc.wantErr) || (err == nil && has != tc.wantHas) {
				t.Errorf("HasInstance = %v, %v; want %v, %v", has, err, tc.wantHas, tc.wantErr)
			}
		})
	}
}

// TestDeleteNodesRefusesAnotherClustersMachine: a node whose annotations
// name another Cluster is not deleted through a group's Machine of the same
// provider ID; the whole call is refused and nothing is marked.
func TestDeleteNodesRefusesAnotherClustersMachine(t *testing.T) {
	ctx := context.Background()
	p, client := newProvider(t, nil, clusterSet("ns", "a", "ms-a"),
		clusterMachine("ns", "a", "ma1", "ms-a", "kwok://w1", "w1"), clusterMachine("ns", "a", "ma2", "ms-a", "kwok://w2", "w2"))
	gs, err := p.NodeGroups(ctx)
	if err != nil || len(gs) != 1 {
		t.Fatalf("groups = %v, %v", gs, err)
	}
	n := annotated(node("w1", "kwok://w1"), NodeClusterNameAnnotation, "b")
	if err := gs[0].DeleteNodes(ctx, []*apiv1.Node{n}); err == nil {
		t.Fatal("DeleteNodes of another cluster's node succeeded")
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" || a.GetVerb() == "patch" {
			t.Errorf("unexpected write %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
