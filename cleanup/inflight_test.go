package cleanup

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
)

// lagging lists, for the groups in frozen, the instances it was given, as
// a provider whose listing has not caught up with its deletions yet.
type lagging struct {
	*fakeprovider.Provider
	frozen map[string][]cloudprovider.Instance
}

type laggingGroup struct {
	cloudprovider.NodeGroup
	l *lagging
}

func (g laggingGroup) Nodes(ctx context.Context) ([]cloudprovider.Instance, error) {
	if f, ok := g.l.frozen[g.Id()]; ok {
		return f, nil
	}
	return g.NodeGroup.Nodes(ctx)
}

func (l *lagging) NodeGroups(ctx context.Context) ([]cloudprovider.NodeGroup, error) {
	gs, err := l.Provider.NodeGroups(ctx)
	for i, g := range gs {
		gs[i] = laggingGroup{NodeGroup: g, l: l}
	}
	return gs, err
}

func (l *lagging) NodeGroupForNode(ctx context.Context, n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	g, err := l.Provider.NodeGroupForNode(ctx, n)
	if g == nil || err != nil {
		return g, err
	}
	return laggingGroup{NodeGroup: g, l: l}, nil
}

// TestDeletedInstanceIsNotDeletedAgainWhileInFlight: a failed and an
// unregistered instance are deleted once; while the provider still lists
// them (its deletion in flight) the next loops neither delete nor count
// them again; past the provision time they are asked for again; once they
// are no longer listed they are forgotten.
func TestDeletedInstanceIsNotDeletedAgainWhileInFlight(t *testing.T) {
	ctx := context.Background()
	w := newWorld()
	w.group(t, "a", 0, 2, 2)
	gs, _ := w.p.NodeGroups(ctx)
	ins, _ := gs[0].Nodes(ctx)
	p := &lagging{Provider: w.p, frozen: map[string][]cloudprovider.Instance{"a": ins}}
	state := clusterstate.NewRegistry(clusterstate.DefaultOptions())
	c := New(Options{MaxDeletionsPerLoop: 20, BreakerRatio: 0.9, BreakerMinimum: 2}, p, w.m)
	loop := func(at time.Duration) Result {
		t.Helper()
		if err := state.Update(ctx, p, w.nodes, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
		return c.Run(ctx, state, t0.Add(at))
	}
	loop(0)
	// Its creation fails only now, so that both are deleted in one loop.
	w.p.SetInstanceStatus("a", ins[3].Id, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
		ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "BROKEN"}})
	p.frozen["a"], _ = gs[0].Nodes(ctx)
	if res := loop(16 * time.Minute); res.Deleted != 2 {
		t.Fatalf("deleted %d in the first loop past the provision time, want 2 (deletions %v)", res.Deleted, w.deletions())
	}
	want := []string{"DeleteNodes a: a-new-4", "DeleteNodes a: a-new-3"}
	for _, at := range []time.Duration{17 * time.Minute, 20 * time.Minute, 31 * time.Minute} {
		if res := loop(at); res.Deleted != 0 {
			t.Errorf("at %v: deleted %d again while in flight (deletions %v)", at, res.Deleted, w.deletions())
		}
	}
	if got := w.deletions(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("deletions %v, want %v", got, want)
	}
	if w.m.deleted[ReasonFailedCreation] != 1 || w.m.deleted[ReasonUnregistered] != 1 || w.m.old != 1 {
		t.Errorf("metrics %+v, want each deletion counted once", w.m)
	}
	// Past the provision time since the deletion: taken for lost.
	loop(32 * time.Minute)
	if got := w.deletions(); len(got) != 4 {
		t.Errorf("deletions %v, want both asked for again past the provision time", got)
	}
}

// TestDeletionIsForgottenOnceTheInstanceIsGone: the memory of a deletion
// lasts while the provider lists the instance.
func TestDeletionIsForgottenOnceTheInstanceIsGone(t *testing.T) {
	ctx := context.Background()
	w := newWorld()
	w.group(t, "a", 0, 3, 1)
	gs, _ := w.p.NodeGroups(ctx)
	ins, _ := gs[0].Nodes(ctx)
	p := &lagging{Provider: w.p, frozen: map[string][]cloudprovider.Instance{"a": ins}}
	state := clusterstate.NewRegistry(clusterstate.DefaultOptions())
	c := New(Options{MaxDeletionsPerLoop: 20, BreakerRatio: 0.9, BreakerMinimum: 2}, p, w.m)
	for _, at := range []time.Duration{0, 16 * time.Minute, 17 * time.Minute} {
		if err := state.Update(ctx, p, w.nodes, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
		c.Run(ctx, state, t0.Add(at))
	}
	if len(c.deleted) != 1 {
		t.Fatalf("remembered deletions %v, want the one still listed", c.deleted)
	}
	delete(p.frozen, "a")
	if err := state.Update(ctx, p, w.nodes, t0.Add(18*time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.Run(ctx, state, t0.Add(18*time.Minute))
	if len(c.deleted) != 0 {
		t.Errorf("remembered deletions %v after the instance went", c.deleted)
	}
	if got := w.deletions(); len(got) != 1 {
		t.Errorf("deletions %v, want one", got)
	}
}
