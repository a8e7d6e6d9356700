package externalgrpc

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
)

// The external gRPC protocol has no call that names a Node's instance; the
// server's NodeGroupForNode answer puts a Node in a group. A Node whose
// provider ID is the listed one is that instance for sure; one spelt
// otherwise (case, the empty host) or one the server puts in the group
// without any resemblance may be any of the group's instances without a
// sure Node: a destroying path keeps them.
func TestIdentifyWithTheServersMatching(t *testing.T) {
	s := newFakeServer()
	s.addGroup("g", 0, 5, 0)
	s.addGroup("h", 0, 5, 0)
	running := &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceRunning}
	vm0 := "azure:///subscriptions/s/resourceGroups/MC_RG/providers/Microsoft.Compute/virtualMachines/vm0"
	vm1 := "azure:///subscriptions/s/resourceGroups/MC_RG/providers/Microsoft.Compute/virtualMachines/vm1"
	hvm := "azure:///subscriptions/s/resourceGroups/MC_RG/providers/Microsoft.Compute/virtualMachines/h0"
	s.mu.Lock()
	s.instances["g"] = []*protos.Instance{{Id: vm0, Status: running}, {Id: vm1, Status: running}}
	s.instances["h"] = []*protos.Instance{{Id: hvm, Status: running}}
	lower0 := "azure:///subscriptions/s/resourcegroups/mc_rg/providers/microsoft.compute/virtualmachines/vm0"
	s.forNode[lower0] = "g"
	s.forNode["other://registered-late"] = "g"
	s.forNode[hvm] = "h"
	s.targets["g"], s.targets["h"] = 2, 1
	s.mu.Unlock()
	p := serve(t, s)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	node := func(name, id string) *apiv1.Node {
		return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apiv1.NodeSpec{ProviderID: id}}
	}
	nodes := []*apiv1.Node{node("n0", lower0), node("late", "other://registered-late"), node("h0", hvm)}
	listed := map[string][]cloudprovider.Instance{}
	groups, err := p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if listed[g.Id()], err = g.Nodes(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ids := cloudprovider.Identify(ctx, p, nodes, listed)
	for _, tc := range []struct {
		instance, node string
		m              cloudprovider.Match
	}{
		{vm0, "n0", cloudprovider.MaybeMatch},   // the same ID but for case
		{vm1, "late", cloudprovider.MaybeMatch}, // the server puts "late" in g without naming its instance
		{hvm, "h0", cloudprovider.SureMatch},
	} {
		if n, m := ids.NodeOf(tc.instance); n != tc.node || m != tc.m {
			t.Errorf("NodeOf(%s) = %q, %v; want %q, %v", tc.instance, n, m, tc.node, tc.m)
		}
	}
}
