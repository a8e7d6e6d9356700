package kwok

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

func faultGroup(faults string) string {
	return fmt.Sprintf(`
nodeGroups:
- name: pool
  maxSize: 100
  template:
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {%s}
`, faults)
}

// TestAPIErrorsChangeNothing: with apiErrorRate 1 every call of the group
// fails with a transient error, and the group is as it was.
func TestAPIErrorsChangeNothing(t *testing.T) {
	client := fake.NewClientset()
	p, g := newTestProvider(t, client, faultGroup("registrationDelay: 1h"))
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	g.cfg.Faults.APIErrorRate = 1
	p.mu.Unlock()
	victim := cloudprovider.InstanceNode(ProviderIDPrefix + g.someInstance(t))
	calls := map[string]error{
		"IncreaseSize":       g.IncreaseSize(ctx, 1),
		"AtomicIncreaseSize": g.AtomicIncreaseSize(ctx, 1),
		"DeleteNodes":        g.DeleteNodes(ctx, []*apiv1.Node{victim}),
		"ForceDeleteNodes":   g.ForceDeleteNodes(ctx, []*apiv1.Node{victim}),
		"DecreaseTargetSize": g.DecreaseTargetSize(ctx, -1),
	}
	_, calls["TargetSize"] = g.TargetSize(ctx)
	_, calls["Nodes"] = g.Nodes(ctx)
	for op, err := range calls {
		if !errors.Is(err, cloudprovider.ErrTransient) || !strings.Contains(err.Error(), op) {
			t.Errorf("%s: error %v, want a transient one naming the call", op, err)
		}
	}
	p.mu.Lock()
	size := len(g.members())
	p.mu.Unlock()
	if size != 2 {
		t.Errorf("size after failed calls = %d, want 2", size)
	}
}

// TestLostResponsesTookEffect: with lostResponseRate 1 each size change
// answers with a timeout that is not ErrTransient (the call changed
// something), and took effect.
func TestLostResponsesTookEffect(t *testing.T) {
	client := fake.NewClientset()
	p, g := newTestProvider(t, client, faultGroup("registrationDelay: 1h, lostResponseRate: 1"))
	ctx := context.Background()
	size := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(g.members())
	}
	check := func(op string, err error, want int) {
		t.Helper()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cloudprovider.ErrTransient) {
			t.Errorf("%s: error %v, want a deadline exceeded that is not ErrTransient", op, err)
		}
		if got := size(); got != want {
			t.Errorf("%s: size %d, want %d", op, got, want)
		}
	}
	check("IncreaseSize", g.IncreaseSize(ctx, 3), 3)
	check("AtomicIncreaseSize", g.AtomicIncreaseSize(ctx, 2), 5)
	check("DecreaseTargetSize", g.DecreaseTargetSize(ctx, -1), 4)
	victim := cloudprovider.InstanceNode(ProviderIDPrefix + g.someInstance(t))
	check("DeleteNodes", g.DeleteNodes(ctx, []*apiv1.Node{victim}), 3)
	if _, err := g.TargetSize(ctx); err != nil {
		t.Errorf("TargetSize: %v; lost responses are of size changes only", err)
	}
}

// TestPartialFailures: with partialFailureRate 1 an increase of n has
// between 1 and n-1 failed instances (the one of an increase of 1), atomic
// increases included; their errors show when their Nodes would have
// appeared.
func TestPartialFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		delta  int
		atomic bool
	}{{1, false}, {2, true}, {3, false}, {6, true}, {6, false}} {
		t.Run(fmt.Sprintf("delta=%d,atomic=%v", tc.delta, tc.atomic), func(t *testing.T) {
			for range 20 {
				_, g := newTestProvider(t, fake.NewClientset(), faultGroup("partialFailureRate: 1"))
				var err error
				if tc.atomic {
					err = g.AtomicIncreaseSize(ctx, tc.delta)
				} else {
					err = g.IncreaseSize(ctx, tc.delta)
				}
				if err != nil {
					t.Fatal(err)
				}
				failed := 0
				instances, err := g.Nodes(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, in := range instances {
					if e := in.Status.ErrorInfo; e != nil {
						failed++
						if e.ErrorClass != cloudprovider.OtherErrorClass || e.ErrorCode != ErrorCodeCreationFailed {
							t.Errorf("error %+v, want class Other, code %s", e, ErrorCodeCreationFailed)
						}
					}
				}
				lo, hi := 1, max(1, tc.delta-1)
				if failed < lo || failed > hi {
					t.Fatalf("%d of %d instances failed, want %d..%d", failed, tc.delta, lo, hi)
				}
			}
		})
	}

	// Their errors show when the Nodes would have appeared.
	_, g := newTestProvider(t, fake.NewClientset(), faultGroup("partialFailureRate: 1, registrationDelay: 1h"))
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	instances, err := g.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range instances {
		if in.Status.ErrorInfo != nil || in.Status.State != cloudprovider.InstanceCreating {
			t.Errorf("instance %s shows %+v before its registration time, want creating", in.Id, in.Status)
		}
	}
}

// someInstance names one instance of the group.
func (g *NodeGroup) someInstance(t *testing.T) string {
	t.Helper()
	g.provider.mu.Lock()
	defer g.provider.mu.Unlock()
	for _, in := range g.members() {
		return in.Name
	}
	t.Fatal("the group has no instance")
	return ""
}

// TestSpellingAndDeletionDelay: nodeProviderIDSpelling writes the Nodes'
// provider IDs another way (still their instances'), and deletionDelay
// keeps a deleted instance listed as being deleted, out of the target
// size, its Node in place, until the delay runs out.
func TestSpellingAndDeletionDelay(t *testing.T) {
	client := fake.NewClientset()
	p, g := newTestProvider(t, client, faultGroup("nodeProviderIDSpelling: emptyHost, deletionDelay: 1s"))
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	node := theNode(t, client)
	if want := "kwok:///" + node.Name; node.Spec.ProviderID != want {
		t.Fatalf("provider ID %q, want %q", node.Spec.ProviderID, want)
	}
	if id, found, _ := p.InstanceOfNode(ctx, node); !found || id != ProviderIDPrefix+node.Name {
		t.Fatalf("InstanceOfNode = %q, %v; want the listed instance", id, found)
	}
	if err := g.DeleteNodes(ctx, []*apiv1.Node{node}); err != nil {
		t.Fatal(err)
	}
	listed, _ := g.Nodes(ctx)
	if len(listed) != 1 || listed[0].Status == nil || listed[0].Status.State != cloudprovider.InstanceDeleting {
		t.Fatalf("listed %+v right after the deletion, want the instance as being deleted", listed)
	}
	if size, _ := g.TargetSize(ctx); size != 0 {
		t.Errorf("target %d while the instance is being deleted, want 0", size)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Node went before the delay ran out: %v", err)
	}
	waitFor(t, "the instance and its Node gone", func() bool {
		listed, _ := g.Nodes(ctx)
		_, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return len(listed) == 0 && err != nil
	})
}

// TestNodeOutlivesNoDeletedInstance: when deleting the Node of a deleted
// instance fails (kube-apiserver restarting), DeleteNodes still succeeds
// (the instance is being deleted), the instance stays listed as Deleting
// and saved in the state ConfigMap, and the scheduler deletes the Node once
// the API answers again; only then is the instance gone. Before, the
// instance went at once and its Node stayed forever, of no group.
func TestNodeOutlivesNoDeletedInstance(t *testing.T) {
	client := fake.NewClientset()
	var failures atomic.Int32
	failures.Store(3)
	client.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures.Add(-1) >= 0 {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	p, g := newTestProvider(t, client, oneGroup)
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	node := theNode(t, client)
	if err := g.DeleteNodes(ctx, []*apiv1.Node{node}); err != nil {
		t.Fatalf("DeleteNodes with the Node's deletion failing: %v, want nil (the instance is being deleted)", err)
	}
	listed, _ := g.Nodes(ctx)
	if len(listed) != 1 || listed[0].Status == nil || listed[0].Status.State != cloudprovider.InstanceDeleting {
		t.Fatalf("listed %+v after the failed Node deletion, want the instance as being deleted", listed)
	}
	if size, _ := g.TargetSize(ctx); size != 0 {
		t.Errorf("target %d while the instance is being deleted, want 0", size)
	}
	if ng, _ := p.NodeGroupForNode(ctx, node); ng == nil {
		t.Error("the Node of the instance being deleted belongs to no group")
	}
	waitFor(t, "the instance saved as being deleted", func() bool { return savedInstances(t, client)[node.Name] })
	waitFor(t, "the Node deleted on a later try, then the instance", func() bool {
		listed, _ := g.Nodes(ctx)
		_, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return len(listed) == 0 && apierrors.IsNotFound(err)
	})
	if left := failures.Load(); left >= 0 {
		t.Errorf("%d injected failures left unused: the test did not exercise the retry", left+1)
	}
	waitFor(t, "the instance gone from the state ConfigMap", func() bool { return !savedInstances(t, client)[node.Name] })
}

// TestDeletedInstanceGoneFromStateOnReturn: when its Node is deleted at
// once, DeleteNodes returns with the instance gone from the group and from
// the state ConfigMap (callers read the state right after).
func TestDeletedInstanceGoneFromStateOnReturn(t *testing.T) {
	client := fake.NewClientset()
	_, g := newTestProvider(t, client, faultGroup("registrationDelay: 1h"))
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	listed, _ := g.Nodes(ctx)
	if len(listed) != 1 {
		t.Fatalf("listed %+v, want one instance", listed)
	}
	name := strings.TrimPrefix(listed[0].Id, ProviderIDPrefix)
	waitFor(t, "the pending instance saved", func() bool { return savedInstances(t, client)[name] })
	placeholder := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: listed[0].Id}, Spec: apiv1.NodeSpec{ProviderID: listed[0].Id}}
	if err := g.ForceDeleteNodes(ctx, []*apiv1.Node{placeholder}); err != nil {
		t.Fatal(err)
	}
	if left, _ := g.Nodes(ctx); len(left) != 0 {
		t.Errorf("listed %+v after the deletion, want none", left)
	}
	if savedInstances(t, client)[name] {
		t.Error("the deleted instance is still in the state ConfigMap when DeleteNodes returned")
	}
}

// theNode waits for the one Node of client and returns it.
func theNode(t *testing.T, client *fake.Clientset) *apiv1.Node {
	t.Helper()
	var node *apiv1.Node
	waitFor(t, "the node", func() bool {
		nodes, _ := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if len(nodes.Items) == 1 {
			node = &nodes.Items[0]
		}
		return node != nil
	})
	return node
}

// TestDeletionSavedWhenTheInformerSeesItFirst: the scheduler deletes the
// Node of an instance being deleted, and the informer's delete event is
// handled before the Delete call returns (a loaded machine). The instance
// left the provider in the informer's handler; the state ConfigMap, which
// listed it as Deleting, must be saved without it all the same. Before, the
// handler removed it without recording a change and the state named it
// forever (make test's TestAtomicAttemptDeletedOrListedLate saw it).
func TestDeletionSavedWhenTheInformerSeesItFirst(t *testing.T) {
	client := fake.NewClientset()
	var p *Provider
	var raced atomic.Bool
	client.PrependReactor("delete", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		p.forgetNode(&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		raced.Store(true)
		return false, nil, nil
	})
	p, g := newTestProvider(t, client, faultGroup("deletionDelay: 1s"))
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	node := theNode(t, client)
	waitFor(t, "the instance registered", func() bool {
		listed, _ := g.Nodes(ctx)
		return len(listed) == 1 && listed[0].Status != nil && listed[0].Status.State == cloudprovider.InstanceRunning
	})
	if err := g.DeleteNodes(ctx, []*apiv1.Node{node}); err != nil {
		t.Fatal(err)
	}
	if !savedInstances(t, client)[node.Name] {
		t.Fatal("the instance being deleted is not in the state ConfigMap when DeleteNodes returned")
	}
	waitFor(t, "the Node deleted", func() bool { return raced.Load() })
	waitFor(t, "the instance gone from the state ConfigMap", func() bool { return !savedInstances(t, client)[node.Name] })
}
