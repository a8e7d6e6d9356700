package clusterapi

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Cluster API matches a Node to its Machine by provider ID, else by the
// Machine's status.nodeRef: a Node whose provider ID is spelt otherwise
// than its Machine's (Azure's resource group in another case) and a Node
// without a provider ID are their Machines' instances for sure, so neither
// counts as an instance without a Node nor as one whose instance is gone.
func TestInstanceOfNodeByNodeRef(t *testing.T) {
	ctx := context.Background()
	azure := "azure:///subscriptions/s/resourceGroups/MC_RG/providers/Microsoft.Compute/virtualMachines/vm1"
	p, _ := newProvider(t, nil,
		makeObj(kindMachineSet, "ns", "ms").sizes("0", "5").replicas(3),
		machine("ns", "m1", "ms", azure, "n1"),
		machine("ns", "m2", "ms", "", "n2"),
		machine("ns", "m3", "ms", "aws:///us-east-1a/i-3", ""),
		machine("ns", "free", "unmanaged", "aws:///i-9", "n9"),
	)
	n1 := node("n1", "azure:///subscriptions/s/resourcegroups/mc_rg/providers/microsoft.compute/virtualmachines/vm1")
	n2 := node("n2", "")
	n3 := node("n3", "aws://us-east-1a/i-3")
	n9 := node("n9", "aws:///i-9")
	for _, tc := range []struct {
		node  *apiv1.Node
		id    string
		found bool
	}{
		{n1, azure, true},
		{n2, PlaceholderPrefix + "ns/m2", true},
		{n3, "aws:///us-east-1a/i-3", true}, // the same ID spelt otherwise
		{n9, "", false},                     // a Machine of no autoscaled group
	} {
		id, found, err := p.InstanceOfNode(ctx, tc.node)
		if err != nil || id != tc.id || found != tc.found {
			t.Errorf("InstanceOfNode(%s) = %q, %v, %v; want %q, %v", tc.node.Name, id, found, err, tc.id, tc.found)
		}
	}
	g := onlyGroup(t, p)
	listed, _ := g.Nodes(ctx)
	ids := cloudprovider.Identify(ctx, p, []*apiv1.Node{n1, n2, n3, n9}, map[string][]cloudprovider.Instance{g.Id(): listed})
	for instance, want := range map[string]struct {
		node string
		m    cloudprovider.Match
	}{
		azure:                       {"n1", cloudprovider.SureMatch},
		PlaceholderPrefix + "ns/m2": {"n2", cloudprovider.SureMatch},
		"aws:///us-east-1a/i-3":     {"n3", cloudprovider.SureMatch},
	} {
		if n, m := ids.NodeOf(instance); n != want.node || m != want.m {
			t.Errorf("NodeOf(%s) = %q, %v; want %q, %v", instance, n, m, want.node, want.m)
		}
	}
}

// Before the first listing the provider cannot tell, and says so.
func TestInstanceOfNodeBeforeListing(t *testing.T) {
	p := New(nil, DefaultGroup, testVersion)
	if _, _, err := p.InstanceOfNode(context.Background(), node("n1", "x://1")); err == nil {
		t.Error("no error before the first listing")
	}
}
