package consolidation

import (
	"context"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// threeGroups: small, medium and large nodes, cheaper per core as they grow.
var threeGroups = []testGroup{
	{id: "small", cpu: "4", price: 0.25},
	{id: "medium", cpu: "8", price: 0.45},
	{id: "large", cpu: "16", price: 0.8},
}

// twoSmallAndAnEmptyMedium: two small nodes whose pods one medium node
// would take (0.6 for 0.45), and an empty medium node m9.
func twoSmallAndAnEmptyMedium(c *cluster) {
	c.groups = []testGroup{{id: "small", cpu: "4", price: 0.3}, {id: "medium", cpu: "8", price: 0.45},
		{id: "large", cpu: "16", price: 0.8}}
	c.node("m9", "medium")
	for _, n := range []string{"s1", "s2"} {
		c.node(n, "small")
		c.pod("p-"+n, "web", "3", n)
	}
}

func TestPlanReplacement(t *testing.T) {
	h := newHandle(t)
	for _, tc := range []struct {
		name  string
		build func(c *cluster)
		opts  func(o *Options)
		in    func(in *Input)
		want  []verdict
		// saving is the first candidate's, when set.
		saving float64
	}{{
		name: "one node replaced by one of the cheapest group that takes its pods",
		build: func(c *cluster) {
			c.node("l1", "large")
			c.fill("l1", "web", 3)
		},
		want:   []verdict{{Nodes: []string{"l1"}, Group: "small"}},
		saving: 0.8 - 0.25,
	}, {
		name: "the cheapest group is too small for a pod: the next one",
		build: func(c *cluster) {
			c.node("l1", "large")
			c.pod("big", "web", "6", "l1")
		},
		want:   []verdict{{Nodes: []string{"l1"}, Group: "medium"}},
		saving: 0.8 - 0.45,
	}, {
		name: "k full nodes replaced by one",
		build: func(c *cluster) {
			for _, n := range []string{"s1", "s2", "s3", "s4"} {
				c.node(n, "small")
				c.fill(n, "web", 4)
			}
		},
		// 16 pods of 1 cpu: one large node (16) for 4 x 0.25.
		want:   []verdict{{Nodes: []string{"s1", "s2", "s3", "s4"}, Group: "large"}},
		saving: 1 - 0.8,
	}, {
		name: "k nodes: at most MaxNodesPerReplacement, in several rounds",
		build: func(c *cluster) {
			c.groups = []testGroup{{id: "small", cpu: "4", price: 0.3}, {id: "medium", cpu: "8", price: 0.45},
				{id: "large", cpu: "16", price: 0.8}}
			for _, n := range []string{"s1", "s2", "s3", "s4"} {
				c.node(n, "small")
				c.pod("p-"+n, "web", "3", n)
			}
		},
		opts: func(o *Options) { o.MaxNodesPerReplacement = 2 },
		// Two 3-cpu pods per medium node (0.6 for 0.45); a large one
		// would take four, but only two nodes may go per replacement.
		want:   []verdict{{Nodes: []string{"s1", "s2"}, Group: "medium"}, {Nodes: []string{"s3", "s4"}, Group: "medium"}},
		saving: 0.6 - 0.45,
	}, {
		name: "k nodes: at most the budget left of their group, in several rounds",
		build: func(c *cluster) {
			c.groups = []testGroup{{id: "small", cpu: "4", price: 0.3}, {id: "medium", cpu: "8", price: 0.45},
				{id: "large", cpu: "16", price: 0.8}}
			for _, n := range []string{"s1", "s2", "s3", "s4"} {
				c.node(n, "small")
				c.pod("p-"+n, "web", "3", n)
			}
		},
		// Without the budget, one large node for the four (as below); the
		// engine would hold a set of 4 small nodes back for ever.
		in:     func(in *Input) { in.BudgetLeft = map[string]int{"small": 2, "large": 0} },
		want:   []verdict{{Nodes: []string{"s1", "s2"}, Group: "medium"}, {Nodes: []string{"s3", "s4"}, Group: "medium"}},
		saving: 0.6 - 0.45,
	}, {
		name:  "a group whose nodes are being deleted is no replacement's group",
		build: twoSmallAndAnEmptyMedium,
		// Two small nodes would go onto one medium (0.6 for 0.45), but a
		// medium node is being deleted: the new one would be emptied
		// next, its pods moved twice. A large one saves nothing.
		in: func(in *Input) { in.Deleting = map[string]bool{"m9": true} },
	}, {
		name:  "a group the plan removes a node of is no replacement's group",
		build: twoSmallAndAnEmptyMedium,
		// The empty medium node goes; the small ones stay for a later plan.
		want: []verdict{{Nodes: []string{"m9"}}},
	}, {
		name: "the nodes cheapest per size go last",
		build: func(c *cluster) {
			// All nodes have 64Gi: the small group is the cheapest per
			// size (0.25 for 4 cores and 64Gi).
			c.node("s1", "small")
			c.fill("s1", "web", 1)
			c.node("m1", "medium")
			c.fill("m1", "web", 2)
			c.node("l2", "large").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			c.fill("l2", "db", 14)
		},
		// l2 has room for two pods: s1's one (more saved per pod moved)
		// would go first, and m1 would stay, a dearer node per size that
		// a later plan would empty onto the nodes that stay. m1 goes.
		opts: func(o *Options) { o.MaxReplacements = 0 },
		want: []verdict{{Nodes: []string{"m1"}}},
	}, {
		name: "k nodes: the group saving most",
		build: func(c *cluster) {
			c.groups = []testGroup{{id: "small", cpu: "4", price: 0.3}, {id: "medium", cpu: "8", price: 0.45},
				{id: "large", cpu: "16", price: 0.8}}
			for _, n := range []string{"s1", "s2", "s3", "s4"} {
				c.node(n, "small")
				c.pod("p-"+n, "web", "3", n)
			}
		},
		want:   []verdict{{Nodes: []string{"s1", "s2", "s3", "s4"}, Group: "large"}},
		saving: 1.2 - 0.8,
	}, {
		name: "a saving under the ratio is no replacement",
		build: func(c *cluster) {
			c.node("l1", "large")
			c.fill("l1", "web", 7)
		},
		// 7 cpu: a medium (0.45) saves 0.35 of 0.8, under half of it.
		opts: func(o *Options) { o.MinSavingRatio = 0.5 },
	}, {
		name: "a saving under the absolute threshold is no replacement",
		build: func(c *cluster) {
			c.node("l1", "large")
			c.fill("l1", "web", 7)
		},
		opts: func(o *Options) { o.MinSavingPerHour = 0.4 },
	}, {
		name: "a group at its max size is no replacement",
		build: func(c *cluster) {
			c.groups = []testGroup{{id: "small", cpu: "4", price: 0.25, max: 1}, {id: "large", cpu: "16", price: 0.8}}
			c.node("s1", "small").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			c.fill("s1", "db", 4)
			c.node("l1", "large")
			c.fill("l1", "web", 3)
		},
	}, {
		name: "a group without a price: its nodes stay, the others are replaced",
		build: func(c *cluster) {
			c.groups = append(c.groups, testGroup{id: "odd", cpu: "4", price: -1})
			c.node("o1", "odd")
			for _, name := range []string{"o-a", "o-b", "o-c", "o-d"} {
				c.pod(name, "db", "1", "o1").Selector(groupLabel, "odd")
			}
			c.node("l1", "large")
			c.fill("l1", "web", 3)
		},
		want:   []verdict{{Nodes: []string{"l1"}, Group: "small"}},
		saving: 0.8 - 0.25,
	}, {
		name: "no price: delete-only",
		build: func(c *cluster) {
			c.unpriced = true
			c.node("l1", "large")
			c.fill("l1", "web", 3)
			c.node("l2", "large")
		},
		want: []verdict{{Nodes: []string{"l2"}}},
	}, {
		name: "delete-only first, replacements for the rest, by saving",
		build: func(c *cluster) {
			c.node("m1", "medium")
			c.fill("m1", "web", 1)
			c.node("l1", "large")
			c.fill("l1", "web", 3)
			c.node("l2", "large").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			c.fill("l2", "db", 14)
		},
		// m1's pod goes onto l2, which has no room left for l1's three; a
		// small node takes them: 0.55 saved, more than m1's 0.45.
		want:   []verdict{{Nodes: []string{"l1"}, Group: "small"}, {Nodes: []string{"m1"}}},
		saving: 0.55,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{groups: threeGroups}
			tc.build(c)
			opts := DefaultOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			in := c.input(h)
			if tc.in != nil {
				tc.in(&in)
			}
			got := NewPlanner(opts).Plan(context.Background(), in)
			if diff := cmp.Diff(tc.want, verdicts(got)); diff != "" {
				t.Errorf("candidates (-want +got):\n%s\n%+v", diff, got)
			}
			if tc.saving != 0 && len(got) > 0 && math.Abs(got[0].SavingPerHour-tc.saving) > 1e-9 {
				t.Errorf("saving %v, want %v", got[0].SavingPerHour, tc.saving)
			}
			for _, cand := range got {
				if len(cand.Replacement) > 0 && cand.Replacement[0].Count != 1 {
					t.Errorf("replacement %+v, want one node", cand.Replacement)
				}
			}
		})
	}
}

// TestPlanSchedulingConstraints: the moves honour the Filter plugins.
func TestPlanSchedulingConstraints(t *testing.T) {
	h := newHandle(t)
	antiAffinity := func(c *cluster, with bool) {
		c.node("n1", "g")
		c.node("n2", "g")
		a := c.pod("a", "web", "1", "n1")
		b := c.pod("b", "web", "1", "n2")
		if with {
			a.AntiAffinity("app", "web")
			b.AntiAffinity("app", "web")
		}
	}
	spread := func(c *cluster, with bool) {
		// Three nodes with one pod of app spread each, and a protected
		// full node without one: a pod of n1 moved onto n2 or n3 makes
		// the skew 2 against the full node.
		for _, n := range []string{"n1", "n2", "n3"} {
			c.node(n, "g")
			p := c.pod("spread-"+n, "spread", "1", n)
			if with {
				p.Obj().Spec.TopologySpreadConstraints = []apiv1.TopologySpreadConstraint{{MaxSkew: 1,
					TopologyKey: apiv1.LabelHostname, WhenUnsatisfiable: apiv1.DoNotSchedule,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
			}
		}
		c.node("full", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
		c.fill("full", "db", 10)
	}
	for _, tc := range []struct {
		name        string
		build       func(c *cluster, with bool)
		with, alone []verdict
	}{
		// Without the constraint one node goes (its pod onto the other);
		// with it neither: a new node of the group saves nothing.
		{"pod anti-affinity", antiAffinity, nil, []verdict{{Nodes: []string{"n1"}}}},
		{"topology spread", spread, nil, []verdict{{Nodes: []string{"n1"}}, {Nodes: []string{"n2"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, with := range []bool{true, false} {
				c := &cluster{groups: oneGroup}
				tc.build(c, with)
				want := tc.alone
				if with {
					want = tc.with
				}
				got := NewPlanner(DefaultOptions()).Plan(context.Background(), c.input(h))
				if diff := cmp.Diff(want, verdicts(got)); diff != "" {
					t.Errorf("constraint %v: candidates (-want +got):\n%s", with, diff)
				}
			}
		})
	}
}

// TestPlanDeterministicAndReverted: the same input gives the same plan, and
// the snapshot is left as it was.
func TestPlanDeterministicAndReverted(t *testing.T) {
	h := newHandle(t)
	c := benchCluster(40)
	in := c.input(h)
	before := podsByNode(t, h.Snapshot())
	p := NewPlanner(DefaultOptions())
	first := p.Plan(context.Background(), in)
	if len(first) == 0 {
		t.Fatal("no candidate in a cluster at 40%")
	}
	if diff := cmp.Diff(before, podsByNode(t, h.Snapshot())); diff != "" {
		t.Errorf("snapshot changed (-before +after):\n%s", diff)
	}
	if h.Snapshot().Forked() {
		t.Error("snapshot left forked")
	}
	for i := 0; i < 3; i++ {
		if diff := cmp.Diff(first, p.Plan(context.Background(), in)); diff != "" {
			t.Fatalf("plan %d differs (-first +now):\n%s", i+2, diff)
		}
	}
	for i := 1; i < len(first); i++ {
		if first[i].SavingPerHour > first[i-1].SavingPerHour {
			t.Errorf("candidates not sorted by saving: %v before %v", first[i-1].SavingPerHour, first[i].SavingPerHour)
		}
	}
	// Every node is in at most one candidate, and the removals respect
	// the groups' min sizes.
	seen := map[string]bool{}
	for _, cand := range first {
		for _, n := range cand.Nodes {
			if seen[n] {
				t.Errorf("node %s in two candidates", n)
			}
			seen[n] = true
		}
	}
}

// TestSimCarriesMovedPods: a node that received pods of an earlier removal
// must find room for them too when it goes.
func TestSimCarriesMovedPods(t *testing.T) {
	h := newHandle(t)
	for _, tc := range []struct {
		name     string
		keepRoom int
		want     bool
	}{{"room for its pod and the carried one", 2, true}, {"room for its own pod only", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{groups: oneGroup}
			c.node("a", "g")
			c.node("c", "g")
			c.node("k", "g")
			c.fill("a", "web", 1)
			c.fill("c", "web", 1)
			c.fill("k", "db", 10-tc.keepRoom)
			in := c.input(h)
			snap := h.Snapshot()
			snap.Fork()
			defer snap.Revert()
			s := newSim(h, []string{"c", "k"})
			// The pods to move are the observed ones; s.moved adds the rest.
			state := func(name string) *nodeState {
				ns := &nodeState{}
				for _, n := range in.Nodes {
					if n.Name == name {
						ns.node = n
					}
				}
				for _, p := range in.Pods {
					if p.Spec.NodeName == name {
						ns.move = append(ns.move, p)
					}
				}
				return ns
			}
			if !s.tryRemove(context.Background(), state("a"), "") {
				t.Fatal("a's pod does not fit c")
			}
			if got := len(s.moved["c"]); got != 1 {
				t.Fatalf("c received %d pods, want 1", got)
			}
			s.closed["a"] = true
			if got := s.tryRemove(context.Background(), state("c"), ""); got != tc.want {
				t.Errorf("removing c: %v, want %v", got, tc.want)
			}
			if tc.want && len(s.moved["k"]) != 2 {
				t.Errorf("k received %d pods, want 2", len(s.moved["k"]))
			}
		})
	}
}

// TestPlanAfterEarlierRemovals: on a session in which an earlier
// simulation (scale-down's) removed a node and moved its pod, that node is
// no candidate and the moved pod moves again with the node it went to.
func TestPlanAfterEarlierRemovals(t *testing.T) {
	h := newHandle(t)
	for _, tc := range []struct {
		name     string
		keepRoom int
		want     []verdict
	}{
		{"room for n1's pod and the moved one", 2, []verdict{{Nodes: []string{"n1"}}}},
		{"room for n1's own pod only", 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{groups: oneGroup}
			c.node("gone", "g")
			moved := c.pod("moved", "web", "1", "gone").Obj()
			c.node("n1", "g")
			c.fill("n1", "web", 1)
			c.node("keep", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			c.fill("keep", "db", 10-tc.keepRoom)
			in := c.input(h)
			snap := h.Snapshot()
			if err := snap.RemoveNode("gone"); err != nil {
				t.Fatal(err)
			}
			cp := *moved
			cp.Spec.NodeName = "n1"
			if err := snap.AddPod(&cp, "n1"); err != nil {
				t.Fatal(err)
			}
			res := NewPlanner(DefaultOptions()).PlanDetailed(context.Background(), in)
			if diff := cmp.Diff(tc.want, verdicts(res.Candidates)); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			if got := res.NotCandidates["gone"]; got != ReasonNotInSimulation {
				t.Errorf("removed node: reason %q, want %q", got, ReasonNotInSimulation)
			}
		})
	}
}

// TestPlanCountsDrainingPods: the pods of a node being deleted take room
// the candidates cannot count on.
func TestPlanCountsDrainingPods(t *testing.T) {
	h := newHandle(t)
	for _, tc := range []struct {
		name     string
		draining bool
		want     []verdict
	}{
		{"d being deleted: its pods take keep's room", true, nil},
		{"d not being deleted", false, []verdict{{Nodes: []string{"n1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{groups: oneGroup}
			c.node("keep", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			c.fill("keep", "db", 8)
			c.node("d", "g")
			c.fill("d", "web", 2)
			c.node("n1", "g")
			c.fill("n1", "web", 1)
			in := c.input(h)
			if tc.draining {
				in.Deleting = map[string]bool{"d": true}
			}
			got := NewPlanner(DefaultOptions()).Plan(context.Background(), in)
			if diff := cmp.Diff(tc.want, verdicts(got)); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanNamesUnsettledDrainingNodes: a node being deleted whose pods no
// longer fit on the nodes that stay is named in Result.Unsettled (its
// removal's reason no longer holds); one whose pods fit is not.
func TestPlanNamesUnsettledDrainingNodes(t *testing.T) {
	h := newHandle(t)
	for _, tc := range []struct {
		name      string
		keepPods  int
		unsettled map[string]bool
	}{
		{"d's 3 pods fit in keep's room of 4", 6, map[string]bool{}},
		{"keep has room for 1 of d's 3 pods", 9, map[string]bool{"d": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{groups: oneGroup}
			c.node("keep", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			c.fill("keep", "db", tc.keepPods)
			c.node("d", "g")
			c.fill("d", "web", 3)
			in := c.input(h)
			in.Deleting = map[string]bool{"d": true}
			res := NewPlanner(DefaultOptions()).PlanDetailed(context.Background(), in)
			if diff := cmp.Diff(tc.unsettled, res.Unsettled); diff != "" {
				t.Errorf("unsettled (-want +got):\n%s", diff)
			}
		})
	}
}
