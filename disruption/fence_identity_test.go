package disruption

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// fenceUntilDeleted runs a heal of a NotReady node with a pod until its
// instance was deleted by name and the heal fences; standing is the
// instance that, as the provider lists it, still stands for the node once
// its Node's own ID is no longer listed (a Machine being deleted).
func fenceUntilDeleted(t *testing.T, h *Engine, f *fixture, standing string) {
	t.Helper()
	f.addPod(t, podOn("sick", "db-0"))
	f.healer = h
	f.loop(0)
	f.provider.AddNode("g", &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: apiv1.NodeSpec{ProviderID: standing}})
	f.loop(3 * time.Minute) // past --max-pod-eviction-time: the instance is deleted first
	if f.calls("DeleteNodes") != 1 || f.phase("sick") != PhaseFencing {
		t.Fatalf("DeleteNodes calls %d, phase %q; want 1 and Fencing", f.calls("DeleteNodes"), f.phase("sick"))
	}
}

// The fence asks the provider's own matching whether the node's instance is
// gone: a Cluster API Machine that its provider matches to the Node by
// nodeRef, listed under a provider ID that is not the Node's, is still
// there, and the node is not marked out of service (its pods would be
// force-deleted while the VM may still run them) until the group no longer
// lists it. With the old byte-equal comparison the node was marked at once.
func TestFenceWaitsForAnInstanceMatchedByNodeRef(t *testing.T) {
	f := newFixture(t, Options{Policies: readyPolicy, MaxConcurrent: 1}, readyNode("sick", nil, notReady(5*time.Minute)),
		readyNode("b", nil), readyNode("c", nil))
	machine := "fake:///RG/zone/Machine-Of-Sick"
	p := cpfake.Matching{Provider: f.provider, Refs: map[string]string{"sick": machine}}
	// The Machine is being deleted but still stands, listed under its own ID.
	fenceUntilDeleted(t, New(f.healer.opts, f.client, p, f.events, nil), f, machine)
	f.loop(3*time.Minute + time.Second)
	if hasTaintKey(f.node(t, "sick"), OutOfServiceTaint) {
		t.Fatal("node marked out of service while its provider still matches it to a listed instance")
	}
	if got := f.phase("sick"); got != PhaseFencing {
		t.Fatalf("phase %q, want Fencing while the instance stands", got)
	}
	// The Machine is gone.
	g, _ := f.provider.NodeGroups(context.Background())
	if err := g[0].ForceDeleteNodes(context.Background(), []*apiv1.Node{{Spec: apiv1.NodeSpec{ProviderID: machine}}}); err != nil {
		t.Fatal(err)
	}
	delete(p.Refs, "sick")
	f.loop(3*time.Minute + 2*time.Second)
	if !hasTaintKey(f.node(t, "sick"), OutOfServiceTaint) {
		t.Error("node not marked out of service once its instance is gone")
	}
}

// Without a provider matching of its own, an instance whose ID differs
// from the Node's only in case (Azure's resource groups) may be the node's:
// the fence keeps waiting.
func TestFenceWaitsForAnInstanceSpeltOtherwise(t *testing.T) {
	f := newFixture(t, Options{Policies: readyPolicy, MaxConcurrent: 1}, readyNode("sick", nil, notReady(5*time.Minute)),
		readyNode("b", nil), readyNode("c", nil))
	fenceUntilDeleted(t, f.healer, f, "fake:///SICK")
	f.loop(3*time.Minute + time.Second)
	if hasTaintKey(f.node(t, "sick"), OutOfServiceTaint) {
		t.Fatal("node marked out of service while an instance that may be it is listed")
	}
}
