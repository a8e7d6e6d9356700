package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

var t0 = time.Date(2026, time.November, 29, 10, 0, 0, 0, time.UTC)

// node is a Ready node created at created.
func node(name string, created time.Time) *apiv1.Node {
	n := testbuild.Node(name).Obj()
	n.CreationTimestamp = metav1.NewTime(created)
	return n
}

func notReady(n *apiv1.Node) *apiv1.Node {
	n.Status.Conditions[0].Status = apiv1.ConditionFalse
	return n
}

func deleting(n *apiv1.Node) *apiv1.Node {
	ts := metav1.NewTime(t0)
	n.DeletionTimestamp = &ts
	return n
}

func tainted(n *apiv1.Node) *apiv1.Node {
	n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: toBeDeletedTaint, Effect: apiv1.TaintEffectNoSchedule})
	return n
}

// cluster registers each node with the group its key names ("" for no
// group) and returns the provider and the loop's node list.
func cluster(groups map[string][]*apiv1.Node) (*fake.Provider, []*apiv1.Node) {
	p := fake.NewProvider()
	var nodes []*apiv1.Node
	for _, id := range []string{"a", "b", "c"} {
		p.AddNodeGroup(id, 0, 100, len(groups[id]), nil)
	}
	for id, ns := range groups {
		for _, n := range ns {
			if id != "" {
				p.AddNode(id, n)
			}
			nodes = append(nodes, n)
		}
	}
	return p, nodes
}

func lookups(p *fake.Provider) int {
	n := 0
	for _, c := range p.Calls() {
		if c.Method == "NodeGroupForNode" {
			n++
		}
	}
	return n
}

func expired(node, group, msg string) disruption.Candidate {
	return disruption.Candidate{Reason: disruption.Expired, Nodes: []string{node},
		Replacement: []disruption.Replacement{{Group: group, Count: 1}}, Message: msg}
}

func TestExpiry(t *testing.T) {
	now := t0.Add(100 * time.Hour)
	for _, tc := range []struct {
		name     string
		groups   map[string][]*apiv1.Node
		lifetime time.Duration
		perGroup map[string]time.Duration // nil: no LifetimeFunc
		want     []disruption.Candidate
	}{
		{name: "off", lifetime: 0,
			groups: map[string][]*apiv1.Node{"a": {node("old", t0)}}},
		{name: "age against the lifetime, oldest first", lifetime: 24 * time.Hour,
			groups: map[string][]*apiv1.Node{
				"a": {node("young", now.Add(-24*time.Hour+time.Second)), node("exact", now.Add(-24*time.Hour))},
				"b": {node("older", now.Add(-48*time.Hour-1500*time.Millisecond))},
			},
			want: []disruption.Candidate{
				expired("older", "b", "node is 48h0m1s old, past the maximum lifetime of 24h0m0s for node group b"),
				expired("exact", "a", "node is 24h0m0s old, past the maximum lifetime of 24h0m0s for node group a"),
			}},
		{name: "skipped: no group, not Ready, being deleted, no creation time", lifetime: time.Hour,
			groups: map[string][]*apiv1.Node{
				"":  {node("stray", t0)},
				"a": {notReady(node("sick", t0)), deleting(node("going", t0)), tainted(node("draining", t0)), node("unknown", time.Time{})},
				"b": {node("kept", t0.Add(time.Minute))},
			},
			want: []disruption.Candidate{
				expired("kept", "b", "node is 99h59m0s old, past the maximum lifetime of 1h0m0s for node group b"),
			}},
		{name: "per group: shorter, off, and the default", lifetime: 50 * time.Hour,
			perGroup: map[string]time.Duration{"a": 10 * time.Hour, "b": 0},
			groups: map[string][]*apiv1.Node{
				"a": {node("a1", now.Add(-11*time.Hour)), node("a2", now.Add(-9*time.Hour))},
				"b": {node("b1", t0)},
				"c": {node("c1", now.Add(-51*time.Hour)), node("c2", now.Add(-49*time.Hour))},
			},
			want: []disruption.Candidate{
				expired("c1", "c", "node is 51h0m0s old, past the maximum lifetime of 50h0m0s for node group c"),
				expired("a1", "a", "node is 11h0m0s old, past the maximum lifetime of 10h0m0s for node group a"),
			}},
		{name: "per group only, the default off", lifetime: 0,
			perGroup: map[string]time.Duration{"b": time.Hour},
			groups: map[string][]*apiv1.Node{
				"a": {node("a1", t0)},
				"b": {node("b1", t0)},
			},
			want: []disruption.Candidate{
				expired("b1", "b", "node is 100h0m0s old, past the maximum lifetime of 1h0m0s for node group b"),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, nodes := cluster(tc.groups)
			var opts []ExpiryOption
			asked := map[string]int{}
			if tc.perGroup != nil {
				opts = append(opts, WithLifetimeFor(func(_ context.Context, g cloudprovider.NodeGroup, def time.Duration) time.Duration {
					asked[g.Id()]++
					if d, ok := tc.perGroup[g.Id()]; ok {
						return d
					}
					return def
				}))
			}
			e := NewExpiry(p, tc.lifetime, opts...)
			if e.Reason() != disruption.Expired {
				t.Errorf("Reason() = %s", e.Reason())
			}
			got := e.Propose(context.Background(), &processors.Loop{Now: now, Nodes: nodes})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Propose (-want +got):\n%s", diff)
			}
			for id, n := range asked {
				if n != 1 {
					t.Errorf("LifetimeFunc asked %d times for group %s in one loop, want once", n, id)
				}
			}
			if tc.lifetime == 0 && tc.perGroup == nil && lookups(p) != 0 {
				t.Errorf("expiry off made %d group lookups, want none", lookups(p))
			}
		})
	}
}

func TestExpiryLookupError(t *testing.T) {
	p, nodes := cluster(map[string][]*apiv1.Node{"a": {node("old", t0)}})
	p.InjectError("NodeGroupForNode", "", errors.New("provider down"))
	got := NewExpiry(p, time.Hour).Propose(context.Background(), &processors.Loop{Now: t0.Add(2 * time.Hour), Nodes: nodes})
	if len(got) != 0 {
		t.Errorf("Propose = %v, want nothing when the group is unknown", got)
	}
}

// TestExpiryWithinOneLoop steps a fake clock by a scan interval from the
// node's creation and checks that the first loop at or after the lifetime
// proposes it, and no loop before.
func TestExpiryWithinOneLoop(t *testing.T) {
	const (
		lifetime     = time.Hour
		scanInterval = 7 * time.Second // does not divide the hour: the loop after the hour
	)
	created := t0.Add(123 * time.Millisecond)
	p, nodes := cluster(map[string][]*apiv1.Node{"a": {node("n", created)}})
	e := NewExpiry(p, lifetime)
	clock := clocktesting.NewFakeClock(created)
	var first time.Time
	for i := 0; i < 1000 && first.IsZero(); i++ {
		clock.Step(scanInterval)
		if len(e.Propose(context.Background(), &processors.Loop{Now: clock.Now(), Nodes: nodes})) > 0 {
			first = clock.Now()
		}
	}
	deadline := created.Add(lifetime)
	if first.Before(deadline) || !first.Before(deadline.Add(scanInterval)) {
		t.Errorf("first proposed at %s, want in [%s, %s)", first, deadline, deadline.Add(scanInterval))
	}
}

// driftingGroup is a fake group that implements DriftDetector: drifted
// names the drifted nodes and why, errs the nodes whose origin it cannot read.
type driftingGroup struct {
	*fake.NodeGroup
	drifted map[string]string
	errs    map[string]error
	asked   int
}

func (g *driftingGroup) Drifted(_ context.Context, n *apiv1.Node) (bool, string, error) {
	g.asked++
	if err := g.errs[n.Name]; err != nil {
		return false, "", err
	}
	why, ok := g.drifted[n.Name]
	return ok, why, nil
}

// driftLookup answers with the driftingGroup of a group when it has one.
type driftLookup struct {
	*fake.Provider
	detectors map[string]*driftingGroup
}

func (l driftLookup) NodeGroupForNode(ctx context.Context, n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	g, err := l.Provider.NodeGroupForNode(ctx, n)
	if g != nil {
		if d, ok := l.detectors[g.Id()]; ok {
			return d, err
		}
	}
	return g, err
}

func drifted(node, group, msg string) disruption.Candidate {
	return disruption.Candidate{Reason: disruption.Drifted, Nodes: []string{node},
		Replacement: []disruption.Replacement{{Group: group, Count: 1}}, Message: msg}
}

func TestDrift(t *testing.T) {
	p, nodes := cluster(map[string][]*apiv1.Node{
		"a": {node("a-new", t0.Add(2*time.Hour)), node("a-old", t0), node("a-fine", t0), node("a-unknown", t0),
			notReady(node("a-sick", t0)), deleting(node("a-going", t0))},
		"b": {node("b-old", t0.Add(time.Hour))},
		"c": {node("c-1", t0)}, // no DriftDetector
		"":  {node("stray", t0)},
	})
	ga := &driftingGroup{drifted: map[string]string{
		"a-new": "", "a-old": "launch template lt-1 version 3, now 4", "a-sick": "x", "a-going": "x"},
		errs: map[string]error{"a-unknown": errors.New("no such instance")}}
	gb := &driftingGroup{drifted: map[string]string{"b-old": "instance type m5.large, now m6i.large"}}
	l := driftLookup{Provider: p, detectors: map[string]*driftingGroup{"a": ga, "b": gb}}
	groups, _ := p.NodeGroups(context.Background())
	for _, g := range groups {
		switch g.Id() {
		case "a":
			ga.NodeGroup = g.(*fake.NodeGroup)
		case "b":
			gb.NodeGroup = g.(*fake.NodeGroup)
		}
	}

	d := NewDrift(l)
	if d.Reason() != disruption.Drifted {
		t.Errorf("Reason() = %s", d.Reason())
	}
	got := d.Propose(context.Background(), &processors.Loop{Now: t0.Add(3 * time.Hour), Nodes: nodes})
	want := []disruption.Candidate{
		drifted("a-old", "a", "node drifted from the template of node group a: launch template lt-1 version 3, now 4"),
		drifted("b-old", "b", "node drifted from the template of node group b: instance type m5.large, now m6i.large"),
		drifted("a-new", "a", "node drifted from the template of node group a"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Propose (-want +got):\n%s", diff)
	}
	// Ready nodes not being deleted are asked: a-new, a-old, a-fine, a-unknown.
	if diff := cmp.Diff([]int{4, 1}, []int{ga.asked, gb.asked}); diff != "" {
		t.Errorf("Drifted calls of a, b (-want +got):\n%s", diff)
	}

	// The next loop, once the group's template is back (or the nodes
	// replaced), proposes nothing: the engine cancels what has not begun.
	ga.drifted, gb.drifted = nil, nil
	if got := d.Propose(context.Background(), &processors.Loop{Now: t0.Add(4 * time.Hour), Nodes: nodes}); len(got) != 0 {
		t.Errorf("Propose after the drift went = %v, want nothing", got)
	}
}

func TestDriftWithoutDetectors(t *testing.T) {
	p, nodes := cluster(map[string][]*apiv1.Node{"a": {node("a1", t0)}, "b": {node("b1", t0)}})
	if got := NewDrift(p).Propose(context.Background(), &processors.Loop{Now: t0, Nodes: nodes}); len(got) != 0 {
		t.Errorf("Propose = %v, want nothing from groups without DriftDetector", got)
	}
}

// mapLookup finds groups by node name in a map, as a real provider's
// cache does (the fake provider scans every instance and records each
// call, which would be most of what a benchmark measures).
type mapLookup map[string]cloudprovider.NodeGroup

func (m mapLookup) NodeGroupForNode(_ context.Context, n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	return m[n.Name], nil
}

// BenchmarkPropose is one loop of each source over 1000 nodes in 10 groups,
// a tenth of them expired and drifted.
func BenchmarkPropose(b *testing.B) {
	p := fake.NewProvider()
	l := mapLookup{}
	var nodes []*apiv1.Node
	for g := 0; g < 10; g++ {
		id := string(rune('a' + g))
		dg := &driftingGroup{NodeGroup: p.AddNodeGroup(id, 0, 1000, 100, nil), drifted: map[string]string{}}
		for i := 0; i < 100; i++ {
			created := t0.Add(time.Duration(i) * time.Hour)
			n := node(id+"-"+time.Duration(i).String(), created)
			l[n.Name] = dg
			nodes = append(nodes, n)
			if i < 10 {
				dg.drifted[n.Name] = "old"
			}
		}
	}
	loop := &processors.Loop{Now: t0.Add(100 * time.Hour), Nodes: nodes}
	ctx := context.Background()
	for _, s := range []disruption.Source{NewExpiry(l, 90*time.Hour+time.Minute), NewDrift(l)} {
		b.Run(string(s.Reason()), func(b *testing.B) {
			if got := len(s.Propose(ctx, loop)); got != 100 {
				b.Fatalf("%d candidates, want 100", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Propose(ctx, loop)
			}
		})
	}
}
