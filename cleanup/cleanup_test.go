package cleanup

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type counts struct {
	deleted map[string]int
	old     int
	open    bool
}

func (c *counts) RegisterDeletedNodes(reason string, n int) { c.deleted[reason] += n }
func (c *counts) RegisterOldUnregisteredNodesRemoved(n int) { c.old += n }
func (c *counts) UpdateUnregisteredBreaker(open bool)       { c.open = open }

// world is a fake provider with groups, some registered nodes, and a
// registry that has watched it for 16 minutes (past the provision time).
type world struct {
	p     *fakeprovider.Provider
	nodes []*apiv1.Node
	state *clusterstate.Registry
	m     *counts
}

// group adds a group with registered ready nodes and instances that never
// register.
func (w *world) group(t *testing.T, id string, min, registered, unregistered int) {
	t.Helper()
	ctx := context.Background()
	g := w.p.AddNodeGroup(id, min, 100, 0, nil)
	if registered+unregistered > 0 {
		if err := g.IncreaseSize(ctx, registered+unregistered); err != nil {
			t.Fatal(err)
		}
	}
	instances, _ := g.Nodes(ctx)
	for i := 0; i < registered; i++ {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-node-%d", id, i),
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
			Spec:   apiv1.NodeSpec{ProviderID: instances[i].Id},
			Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}}
		w.nodes = append(w.nodes, n)
	}
}

func newWorld() *world {
	return &world{p: fakeprovider.NewProvider(), m: &counts{deleted: map[string]int{}}}
}

// observe lets the registry see the world at t0 and again at 16m.
func (w *world) observe(t *testing.T) {
	t.Helper()
	w.state = clusterstate.NewRegistry(clusterstate.DefaultOptions())
	for _, at := range []time.Time{t0, t0.Add(16 * time.Minute)} {
		if err := w.state.Update(context.Background(), w.p, w.nodes, at); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *world) run(t *testing.T, mutate func(*Options)) Result {
	t.Helper()
	w.observe(t)
	o := Options{MaxDeletionsPerLoop: 20, BreakerRatio: 0.5, BreakerMinimum: 2}
	if mutate != nil {
		mutate(&o)
	}
	return New(o, w.p, w.m).Run(context.Background(), w.state, t0.Add(16*time.Minute))
}

// deletions lists "<method> <group>: <names>" for every delete call.
func (w *world) deletions() []string {
	var out []string
	for _, c := range w.p.Calls() {
		if c.Method == "DeleteNodes" || c.Method == "ForceDeleteNodes" {
			names := append([]string(nil), c.Nodes...)
			sort.Strings(names)
			out = append(out, fmt.Sprintf("%s %s: %s", c.Method, c.Group, strings.Join(names, ",")))
		}
	}
	return out
}

func TestUnregisteredInstancesAreDeletedByName(t *testing.T) {
	w := newWorld()
	w.group(t, "a", 0, 3, 1)
	w.group(t, "b", 0, 2, 0)
	res := w.run(t, nil)
	if got := w.deletions(); len(got) != 1 || got[0] != "DeleteNodes a: a-new-4" {
		t.Fatalf("deletions %v, want a's never-registered instance, by name", got)
	}
	if res.Deleted != 1 || w.m.deleted[ReasonUnregistered] != 1 || w.m.old != 1 {
		t.Errorf("result %+v, metrics %+v", res, w.m)
	}
}

func TestMinimumSizeKeepsBrokenInstancesUnlessForced(t *testing.T) {
	w := newWorld()
	w.group(t, "a", 2, 1, 1) // target 2 = min
	w.run(t, nil)
	if got := w.deletions(); len(got) != 0 {
		t.Fatalf("deleted %v from a group at its minimum", got)
	}
	w = newWorld()
	w.group(t, "a", 2, 1, 1)
	w.run(t, func(o *Options) { o.ForceDeleteUnregistered = true })
	if got := w.deletions(); len(got) != 1 || !strings.HasPrefix(got[0], "ForceDeleteNodes a:") {
		t.Fatalf("deletions %v, want a forced one", got)
	}
}

func TestBreakerKeepsAGroupThatLooksAllUnregistered(t *testing.T) {
	w := newWorld()
	w.group(t, "mismatch", 0, 0, 4) // e.g. Nodes registered under another provider ID spelling
	w.group(t, "healthy", 0, 5, 1)
	res := w.run(t, nil)
	if got := w.deletions(); len(got) != 1 || !strings.HasPrefix(got[0], "DeleteNodes healthy:") {
		t.Fatalf("deletions %v, want only healthy's one broken instance", got)
	}
	if len(res.BreakerOpen) != 1 || res.BreakerOpen[0] != "mismatch" || !w.m.open {
		t.Errorf("breaker %v (metric %v), want open for mismatch", res.BreakerOpen, w.m.open)
	}
	// Cluster-wide: most instances everywhere look unregistered.
	w = newWorld()
	w.group(t, "x", 0, 1, 2)
	w.group(t, "y", 0, 1, 2)
	res = w.run(t, nil)
	if got := w.deletions(); len(got) != 0 || len(res.BreakerOpen) == 0 || res.BreakerOpen[0] != "cluster" {
		t.Errorf("deletions %v breaker %v, want nothing deleted and the cluster breaker open", got, res.BreakerOpen)
	}
}

func TestFailedCreationsAreDeleted(t *testing.T) {
	w := newWorld()
	w.group(t, "a", 0, 1, 1)
	instances, _ := w.p.NodeGroups(context.Background())
	ins, _ := instances[0].Nodes(context.Background())
	w.p.SetInstanceStatus("a", ins[1].Id, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
		ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT"}})
	w.run(t, nil)
	if got := w.deletions(); len(got) != 1 || got[0] != "DeleteNodes a: a-new-2" || w.m.deleted[ReasonFailedCreation] != 1 {
		t.Fatalf("deletions %v metrics %+v, want the failed instance", got, w.m)
	}
}

func TestCapAndDryRun(t *testing.T) {
	w := newWorld()
	w.group(t, "a", 0, 10, 4)
	res := w.run(t, func(o *Options) { o.MaxDeletionsPerLoop = 3 })
	if res.Deleted != 3 {
		t.Errorf("deleted %d, want the cap of 3", res.Deleted)
	}
	w = newWorld()
	w.group(t, "a", 0, 10, 4)
	res = w.run(t, func(o *Options) { o.DryRun = true })
	if got := w.deletions(); len(got) != 0 || res.Changed() {
		t.Errorf("a dry run deleted %v", got)
	}
}

func TestTargetWithoutInstancesIsDecreased(t *testing.T) {
	w := newWorld()
	w.p.AddNodeGroup("a", 0, 10, 3, nil) // target 3, no instance at all
	w.observe(t)
	c := New(Options{MaxDeletionsPerLoop: 20, BreakerRatio: 0.5, BreakerMinimum: 2}, w.p, w.m)
	ctx := context.Background()
	if res := c.Run(ctx, w.state, t0); res.Resized != 0 {
		t.Fatal("resized at first sight")
	}
	if res := c.Run(ctx, w.state, t0.Add(10*time.Minute)); res.Resized != 0 {
		t.Fatal("resized before the provision time")
	}
	if res := c.Run(ctx, w.state, t0.Add(16*time.Minute)); res.Resized != 1 {
		t.Fatal("not resized after the provision time")
	}
	var decreases []fakeprovider.Call
	for _, call := range w.p.Calls() {
		if call.Method == "DecreaseTargetSize" {
			decreases = append(decreases, call)
		}
	}
	if len(decreases) != 1 || decreases[0].Delta != -3 {
		t.Errorf("DecreaseTargetSize calls %+v, want one of -3", decreases)
	}
}

func TestProviderIDSpellings(t *testing.T) {
	for _, pair := range [][2]string{
		{"aws:///us-east-1a/i-0abc", "aws://us-east-1a/i-0abc"},
		{"AWS:///us-east-1a/i-0abc/", "aws://us-east-1a/i-0abc"},
		{"gce://project/zone/name", "gce://project//zone/name"},
		{"kwok://n1", "kwok://n1"},
	} {
		if a, b := clusterstate.NormalizeProviderID(pair[0]), clusterstate.NormalizeProviderID(pair[1]); a != b {
			t.Errorf("%q -> %q and %q -> %q differ", pair[0], a, pair[1], b)
		}
	}
	if clusterstate.NormalizeProviderID("aws:///a/i-1") == clusterstate.NormalizeProviderID("aws:///a/i-2") {
		t.Error("different instances normalise to the same id")
	}
}

// A group's Nodes registered under a provider ID that matches none of its
// instances (a misconfigured cloud controller): too few of them to trip
// the breaker, so the old code deleted the instances as unregistered, and
// with them the registered, healthy Nodes and their pods (seen by the kwok
// fault test with foreignProviderID). An instance whose id ends in the name
// (or provider ID) of a Node matching no instance is kept and reported; a
// really unregistered one is still deleted.
func TestInstanceOfANodeWithAnotherProviderIDIsNotDeleted(t *testing.T) {
	w := newWorld()
	w.group(t, "healthy", 0, 3, 0)
	w.group(t, "odd", 0, 0, 2)
	w.group(t, "ghost", 0, 0, 1)
	ctx := context.Background()
	ngs, _ := w.p.NodeGroups(ctx)
	for _, ng := range ngs {
		if ng.Id() != "odd" {
			continue
		}
		instances, _ := ng.Nodes(ctx)
		for i, in := range instances {
			name := in.Id[strings.LastIndex(in.Id, "/")+1:]
			providerID := "othercloud://" + name
			if i == 1 {
				providerID = "othercloud://zone/" + name // matched by the provider ID's last segment
				name = fmt.Sprintf("node-%d", i)
			}
			w.nodes = append(w.nodes, &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:   apiv1.NodeSpec{ProviderID: providerID},
				Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}})
		}
	}
	res := w.run(t, nil)
	if got := w.deletions(); len(got) != 1 || got[0] != "DeleteNodes ghost: ghost-new-1" {
		t.Fatalf("deletions %v, want only ghost's unregistered instance", got)
	}
	if res.Deleted != 1 || len(res.BreakerOpen) != 0 {
		t.Errorf("result %+v, want one deletion and no breaker", res)
	}
}
