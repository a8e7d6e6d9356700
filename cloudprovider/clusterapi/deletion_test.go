package clusterapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// The fake clock of newProvider reads 2026-01-02T03:04:05Z.
const testNow = "2026-01-02T03:04:05Z"

// threeMachines is a MachineDeployment of three Machines, min size 0.
func threeMachines(extra ...*obj) []*obj {
	objs := []*obj{
		makeObj(kindMachineDeployment, "ns", "md").sizes("0", "5").replicas(3),
		makeObj(kindMachineSet, "ns", "md-1").owner(kindMachineDeployment, "md"),
		machine("ns", "m1", "md-1", "aws:///i-1", "n1"),
		machine("ns", "m2", "md-1", "aws:///i-2", "n2"),
		machine("ns", "m3", "md-1", "aws:///i-3", "n3"),
	}
	return append(objs, extra...)
}

func groupOf(t *testing.T, p *Provider) cloudprovider.NodeGroup {
	t.Helper()
	g, err := p.NodeGroupForNode(context.Background(), node("n1", "aws:///i-1"))
	if err != nil || g == nil {
		t.Fatalf("NodeGroupForNode = %v, %v", g, err)
	}
	return g
}

func setReplicas(t *testing.T, c *dynamicfake.FakeDynamicClient, p *Provider, n int64) {
	t.Helper()
	gvr := p.gvr(kindMachineDeployment)
	u, err := c.Resource(gvr).Namespace("ns").Get(context.Background(), "md", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, n, "spec", "replicas")
	if _, err := c.Resource(gvr).Namespace("ns").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bufferedContext returns a context whose logger keeps what is logged.
func bufferedContext(t *testing.T) (context.Context, func() string) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(2)))
	return klog.NewContext(context.Background(), logger), func() string {
		return logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	}
}

// TestDeleteNodesTwiceLowersReplicasOnce: the same Machine asked for again,
// by the same group before any Refresh, by the group of a later Refresh
// (Cluster API has not set its deletion timestamp yet), and together with
// another Machine, lowers the replicas once for it; after a Refresh it is
// listed as being deleted.
func TestDeleteNodesTwiceLowersReplicasOnce(t *testing.T) {
	ctx := context.Background()
	p, c := newProvider(t, nil, threeMachines()...)
	g := groupOf(t, p)
	n1 := []*apiv1.Node{node("n1", "aws:///i-1")}
	if err := g.DeleteNodes(ctx, n1); err != nil {
		t.Fatal(err)
	}
	a := machineAnnotations(t, c, "ns", "m1")
	if a[DeleteMachineAnnotation] != testNow || a[OwnDeletionAnnotation] != testNow {
		t.Fatalf("annotations of m1 = %v, want both marks at %s", a, testNow)
	}
	if err := g.DeleteNodes(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 2 {
		t.Fatalf("replicas = %d after the same group asked twice, want 2", got)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	g = groupOf(t, p)
	if err := g.DeleteNodes(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 2 {
		t.Fatalf("replicas = %d after a later loop asked again, want 2", got)
	}
	if err := g.DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1"), node("n2", "aws:///i-2")}); err != nil {
		t.Fatal(err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 1 {
		t.Fatalf("replicas = %d after m1 again and m2, want 1 (m2's decrease only)", got)
	}
	if _, marked := machineAnnotations(t, c, "ns", "m3")[DeleteMachineAnnotation]; marked {
		t.Error("m3 was marked")
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	ins, _ := groupOf(t, p).Nodes(ctx)
	for _, in := range ins {
		deleting := in.Status.State == cloudprovider.InstanceDeleting
		if want := in.Id != "aws:///i-3"; deleting != want {
			t.Errorf("instance %s deleting = %v, want %v", in.Id, deleting, want)
		}
	}
}

// TestUsersDeleteMachineAnnotationIsNotTheAutoscalers: a delete-machine
// annotation a user set lowers nothing by itself: the autoscaler's deletion
// of that Machine lowers the replicas (once), and taking it back after a
// failed decrease leaves the user's annotation.
func TestUsersDeleteMachineAnnotationIsNotTheAutoscalers(t *testing.T) {
	ctx := context.Background()
	users := machine("ns", "m1", "md-1", "aws:///i-1", "n1").ann(DeleteMachineAnnotation, "yes")
	objs := threeMachines()
	objs[2] = users
	p, c := newProvider(t, nil, objs...)
	n1 := []*apiv1.Node{node("n1", "aws:///i-1")}
	for range 2 {
		if err := groupOf(t, p).DeleteNodes(ctx, n1); err != nil {
			t.Fatal(err)
		}
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}

	p, c = newProvider(t, nil, objs...)
	g := groupOf(t, p)
	setReplicas(t, c, p, 4) // another writer: the decrease is refused
	if err := g.DeleteNodes(ctx, n1); !cloudprovider.IsTransient(err) {
		t.Fatalf("err = %v, want a transient error", err)
	}
	a := machineAnnotations(t, c, "ns", "m1")
	if _, ours := a[OwnDeletionAnnotation]; ours {
		t.Errorf("the autoscaler's mark stayed after a failed decrease: %v", a)
	}
	if _, kept := a[DeleteMachineAnnotation]; !kept {
		t.Errorf("the user's delete-machine annotation was removed: %v", a)
	}
}

// TestMarkedMachineGetsItsDeleteMachineAnnotationBack: a Machine the
// autoscaler marked whose delete-machine annotation was removed gets it
// back, so that Cluster API takes it for the decrease already made; the
// replicas stay.
func TestMarkedMachineGetsItsDeleteMachineAnnotationBack(t *testing.T) {
	ctx := context.Background()
	marked := machine("ns", "m1", "md-1", "aws:///i-1", "n1").ann(OwnDeletionAnnotation, "2026-01-02T03:00:00Z")
	objs := threeMachines()
	objs[2] = marked
	p, c := newProvider(t, nil, objs...)
	if err := groupOf(t, p).DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); err != nil {
		t.Fatal(err)
	}
	if got := machineAnnotations(t, c, "ns", "m1")[DeleteMachineAnnotation]; got != "2026-01-02T03:00:00Z" {
		t.Errorf("delete-machine annotation = %q, want the mark's time back", got)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 3 {
		t.Errorf("replicas = %d, want 3", got)
	}
}

// TestStuckMarkedMachineIsReportedNotDecreasedAgain: a Machine marked longer
// than MarkedDeletionTimeout ago and still not being deleted (the
// MachineSet controller down, or the replicas raised by someone since the
// decrease) is reported, once, and its deletion lowers nothing.
func TestStuckMarkedMachineIsReportedNotDecreasedAgain(t *testing.T) {
	ctx, logs := bufferedContext(t)
	stuck := machine("ns", "m1", "md-1", "aws:///i-1", "n1").ann(OwnDeletionAnnotation, "2026-01-02T02:50:00Z").
		ann(DeleteMachineAnnotation, "2026-01-02T02:50:00Z")
	objs := threeMachines()
	objs[2] = stuck
	c, _ := newFake(t, objs...)
	p := New(c, DefaultGroup, testVersion, WithClock(clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))))
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := groupOf(t, p).DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 3 {
		t.Errorf("replicas = %d, want 3", got)
	}
	const msg = "A Machine the autoscaler marked for deletion is still not being deleted"
	if n := strings.Count(logs(), msg); n != 1 {
		t.Errorf("stuck Machine reported %d times, want once; log:\n%s", n, logs())
	}
	// A fresh mark is not stuck.
	p, _ = newProvider(t, nil, threeMachines()...)
	ctx, logs = bufferedContext(t)
	if err := groupOf(t, p).DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); err != nil {
		t.Fatal(err)
	}
	if err := groupOf(t, p).DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs(), msg) {
		t.Errorf("a fresh mark reported as stuck:\n%s", logs())
	}
}

// TestDecreaseOfUnknownOutcomeKeepsTheMarks: when the write of the replicas
// may have been applied (a server error), the marks stay, so that neither
// Cluster API removes another Machine for it nor a later call lowers the
// replicas again; a refused write takes them back.
func TestDecreaseOfUnknownOutcomeKeepsTheMarks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantKept bool
	}{
		{"server error", apierrors.NewInternalError(errors.New("etcd timed out")), true},
		{"no answer", errors.New("connection reset by peer"), true},
		{"refused", apierrors.NewForbidden(schema.GroupResource{Resource: "machinedeployments"}, "md", errors.New("no")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, c := newProvider(t, nil, threeMachines()...)
			fail := true
			c.PrependReactor("update", "machinedeployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "scale" || !fail {
					return false, nil, nil
				}
				return true, nil, tc.err
			})
			n1 := []*apiv1.Node{node("n1", "aws:///i-1")}
			if err := groupOf(t, p).DeleteNodes(ctx, n1); err == nil {
				t.Fatal("DeleteNodes succeeded over a failed write")
			}
			_, kept := machineAnnotations(t, c, "ns", "m1")[OwnDeletionAnnotation]
			if kept != tc.wantKept {
				t.Fatalf("mark kept = %v, want %v", kept, tc.wantKept)
			}
			fail = false
			if err := groupOf(t, p).DeleteNodes(ctx, n1); err != nil {
				t.Fatal(err)
			}
			want := int64(2)
			if tc.wantKept {
				want = 3 // the lost decrease is not made up for: never twice
			}
			if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != want {
				t.Errorf("replicas = %d, want %d", got, want)
			}
		})
	}
}

// TestReplicasRaisedSinceTheDecreaseAreNotLoweredAgain: someone raises the
// replicas after the autoscaler lowered them for m1, before Cluster API
// acted; asking for m1 again lowers nothing.
func TestReplicasRaisedSinceTheDecreaseAreNotLoweredAgain(t *testing.T) {
	ctx := context.Background()
	p, c := newProvider(t, nil, threeMachines()...)
	n1 := []*apiv1.Node{node("n1", "aws:///i-1")}
	if err := groupOf(t, p).DeleteNodes(ctx, n1); err != nil {
		t.Fatal(err)
	}
	setReplicas(t, c, p, 3)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := groupOf(t, p).DeleteNodes(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 3 {
		t.Errorf("replicas = %d, want the other writer's 3", got)
	}
}

// TestConcurrentMarkIsNotTakenTwice: the mark is conditional on the
// Machine's resourceVersion; when another writer (another autoscaler
// replica, say) marked the Machine between the read and the mark, the
// conflict is read again and the Machine is left to that writer's
// decrease.
func TestConcurrentMarkIsNotTakenTwice(t *testing.T) {
	ctx := context.Background()
	objs := threeMachines()
	objs[2].u.SetResourceVersion("7")
	p, c := newProvider(t, nil, objs...)
	gvr := p.gvr(kindMachine)
	raced := false
	c.PrependReactor("patch", "machines", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		if !strings.Contains(string(a.(clienttesting.PatchAction).GetPatch()), `"resourceVersion":"7"`) {
			t.Errorf("the mark is not conditional on the resourceVersion read: %s", a.(clienttesting.PatchAction).GetPatch())
		}
		o, err := c.Tracker().Get(gvr, "ns", "m1")
		if err != nil {
			return true, nil, err
		}
		m := o.(*unstructured.Unstructured)
		m.SetAnnotations(map[string]string{OwnDeletionAnnotation: testNow, DeleteMachineAnnotation: testNow})
		m.SetResourceVersion("8")
		if err := c.Tracker().Update(gvr, m, "ns"); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(gvr.GroupResource(), "m1", errors.New("the object has been modified"))
	})
	if err := groupOf(t, p).DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the mark was not written")
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 3 {
		t.Errorf("replicas = %d, want 3: the other writer lowers them for m1", got)
	}
}

// TestRemovalsOfOverlappingLoopsEachLowerOnce: two loops' snapshots read
// the same replicas (3); the first loop's removal lowers them to 2 after
// the second loop's snapshot was read. The second loop's removal of
// another Machine finds 2, the first one's own write, and lowers them to 1
// (it used to refuse, "not 3 as last seen", and the node's removal
// failed). A change by anyone else is still refused.
func TestRemovalsOfOverlappingLoopsEachLowerOnce(t *testing.T) {
	ctx := context.Background()
	p, c := newProvider(t, nil, threeMachines()...)
	first := groupOf(t, p)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	second := groupOf(t, p)
	if first == second {
		t.Fatal("the two loops share one snapshot of the group")
	}
	if err := first.DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); err != nil {
		t.Fatal(err)
	}
	if err := second.DeleteNodes(ctx, []*apiv1.Node{node("n2", "aws:///i-2")}); err != nil {
		t.Fatalf("the second loop's removal: %v", err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 1 {
		t.Errorf("replicas = %d after two removals of two loops, want 1", got)
	}
	if size, _ := second.TargetSize(ctx); size != 1 {
		t.Errorf("the second snapshot's target size = %d, want 1", size)
	}

	// Someone else sets the replicas: a snapshot read before that refuses.
	third := groupOf(t, p)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	setReplicas(t, c, p, 2)
	if err := third.DeleteNodes(ctx, []*apiv1.Node{node("n3", "aws:///i-3")}); !errors.Is(err, cloudprovider.ErrTransient) {
		t.Errorf("removal after another writer's change: err = %v, want a transient refusal", err)
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 2 {
		t.Errorf("replicas = %d, want the other writer's 2", got)
	}
	if _, marked := machineAnnotations(t, c, "ns", "m3")[OwnDeletionAnnotation]; marked {
		t.Error("m3 stays marked after a refused removal")
	}
}

// TestRebaseKeepsTheMinSize: the second loop's removal, rebased on the
// first one's write, would go below the min size: refused, nothing marked.
func TestRebaseKeepsTheMinSize(t *testing.T) {
	ctx := context.Background()
	objs := threeMachines()
	objs[0] = makeObj(kindMachineDeployment, "ns", "md").sizes("2", "5").replicas(3)
	p, c := newProvider(t, nil, objs...)
	first := groupOf(t, p)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	second := groupOf(t, p)
	if err := first.DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); err != nil {
		t.Fatal(err)
	}
	if err := second.DeleteNodes(ctx, []*apiv1.Node{node("n2", "aws:///i-2")}); err == nil {
		t.Error("a removal below the min size after the first loop's removal succeeded")
	}
	if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != 2 {
		t.Errorf("replicas = %d, want 2 (the min)", got)
	}
	if _, marked := machineAnnotations(t, c, "ns", "m2")[OwnDeletionAnnotation]; marked {
		t.Error("m2 stays marked after a refused removal")
	}
}
