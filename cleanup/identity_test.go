package cleanup

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
)

func readyNodeWithID(name, providerID string) *apiv1.Node {
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:   apiv1.NodeSpec{ProviderID: providerID},
		Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}}
}

// runWith observes the world through provider for 16 minutes and runs the
// cleanup with it.
func (w *world) runWith(t *testing.T, provider cloudprovider.CloudProvider) Result {
	t.Helper()
	w.state = clusterstate.NewRegistry(clusterstate.DefaultOptions())
	for _, at := range []time.Time{t0, t0.Add(16 * time.Minute)} {
		if err := w.state.Update(context.Background(), provider, w.nodes, at); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{MaxDeletionsPerLoop: 20, BreakerRatio: 0.5, BreakerMinimum: 2}
	return New(o, provider, w.m).Run(context.Background(), w.state, t0.Add(16*time.Minute))
}

// An instance whose Node its provider matches by a rule of its own (a
// Machine's nodeRef) is registered, however different the Node's provider
// ID: it is neither counted nor deleted as unregistered.
func TestInstanceMatchedByItsProviderIsNotUnregistered(t *testing.T) {
	w := newWorld()
	w.group(t, "a", 0, 3, 1)
	instances, _ := w.p.NodeGroups(context.Background())
	listed, _ := instances[0].Nodes(context.Background())
	w.nodes = append(w.nodes, readyNodeWithID("worker-x", "othercloud:///zone/vm-77"))
	p := fakeprovider.Matching{Provider: w.p, Refs: map[string]string{"worker-x": listed[3].Id}}
	res := w.runWith(t, p)
	if got := w.deletions(); len(got) != 0 || res.Deleted != 0 {
		t.Fatalf("deletions %v, want none: the instance has a Node by its provider's matching", got)
	}
	if c := w.state.Group("a").Counts; c.LongUnregistered != 0 || c.Unregistered != 0 || c.Ready != 4 {
		t.Errorf("counts %+v, want 4 ready and none unregistered", c)
	}
}

// An instance that a Node may be (its provider ID differs only in case, as
// Azure's resource groups do) is kept, not deleted as unregistered.
func TestInstanceThatANodeMayBeIsKept(t *testing.T) {
	w := newWorld()
	w.group(t, "a", 0, 3, 1)
	w.nodes = append(w.nodes, readyNodeWithID("worker-x", "FAKE://A-NEW-4"))
	res := w.runWith(t, w.p)
	if got := w.deletions(); len(got) != 0 || res.Deleted != 0 {
		t.Fatalf("deletions %v, want none: a Node may be the instance", got)
	}
	long := w.state.Group("a").LongUnregistered
	if len(long) != 1 || long[0].Node != "worker-x" {
		t.Errorf("long unregistered %+v, want the instance with worker-x as the Node that may be it", long)
	}
}
