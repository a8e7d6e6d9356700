package consolidation

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// verdict is what a test expects of one plan: each candidate's nodes and
// replacement group ("" for delete-only), in the plan's order.
type verdict struct {
	Nodes []string
	Group string
}

func verdicts(cs []disruption.Candidate) []verdict {
	var out []verdict
	for _, c := range cs {
		v := verdict{Nodes: c.Nodes}
		if len(c.Replacement) > 0 {
			v.Group = c.Replacement[0].Group
		}
		out = append(out, v)
	}
	return out
}

// oneGroup is a group of 10-cpu nodes at 1.0 per hour.
var oneGroup = []testGroup{{id: "g", cpu: "10", price: 1}}

func TestPlanDeleteOnly(t *testing.T) {
	h := newHandle(t)
	for _, tc := range []struct {
		name  string
		build func(c *cluster)
		opts  func(o *Options)
		want  []verdict
		// notCandidate names a node and the start of its reason.
		notCandidate map[string]string
	}{{
		name: "two pods of a one-disruption PDB on a node: still a candidate",
		build: func(c *cluster) {
			c.node("n1", "g")
			c.fill("n1", "web", 2)
			c.pdb("web", 1)
			c.node("n2", "g")
			c.fill("n2", "db", 5)
		},
		want: []verdict{{Nodes: []string{"n1"}}},
	}, {
		name: "a PDB allowing no disruption now makes a node a later candidate, not an impossible one",
		build: func(c *cluster) {
			c.node("n1", "g")
			c.fill("n1", "web", 1)
			c.pdb("web", 0)
			c.node("n2", "g")
			c.fill("n2", "db", 3)
			c.node("keep", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
		},
		want: []verdict{{Nodes: []string{"n2"}}, {Nodes: []string{"n1"}}},
	}, {
		name: "a node above 50% utilisation whose pods fit elsewhere is a candidate",
		build: func(c *cluster) {
			c.node("busy", "g")
			c.fill("busy", "web", 6)
			c.node("keep", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			c.fill("keep", "db", 3)
		},
		want:         []verdict{{Nodes: []string{"busy"}}},
		notCandidate: map[string]string{"keep": ReasonScaleDownDisabled},
	}, {
		name: "pods that fit nowhere keep their node",
		build: func(c *cluster) {
			c.node("n1", "g")
			c.fill("n1", "web", 6)
			c.node("n2", "g")
			c.fill("n2", "db", 6)
		},
		notCandidate: map[string]string{"n1": ReasonNoPlaceToMovePods, "n2": ReasonNoPlaceToMovePods},
	}, {
		name: "several nodes go together onto the ones that stay; the most valuable first",
		build: func(c *cluster) {
			for _, n := range []string{"a", "b", "c", "d"} {
				c.node(n, "g")
			}
			c.fill("a", "web", 5)
			c.fill("b", "web", 2)
			c.fill("c", "web", 1)
			c.fill("d", "web", 3)
		},
		// c (1 pod), b (2), d (3) go onto a: 5+1+2+3 = 11 > 10, so d stays.
		want:         []verdict{{Nodes: []string{"c"}}, {Nodes: []string{"b"}}},
		notCandidate: map[string]string{"a": ReasonNoPlaceToMovePods, "d": ReasonNoPlaceToMovePods},
	}, {
		name: "the nodes that receive pods are the last candidates",
		build: func(c *cluster) {
			for _, n := range []string{"a", "b", "c"} {
				c.node(n, "g")
			}
			c.fill("a", "web", 1)
			c.fill("b", "web", 2)
			c.fill("c", "web", 3)
		},
		// a's pod goes to c (last candidate, first destination), then b's
		// two; c (6 pods with them) has nowhere to go.
		want: []verdict{{Nodes: []string{"a"}}, {Nodes: []string{"b"}}},
	}, {
		name: "min size: removals stop at the group's min, counted together",
		build: func(c *cluster) {
			c.groups = []testGroup{{id: "g", cpu: "10", price: 1, min: 2}}
			for _, n := range []string{"a", "b", "c"} {
				c.node(n, "g")
			}
			c.fill("a", "web", 1)
		},
		want:         []verdict{{Nodes: []string{"b"}}},
		notCandidate: map[string]string{"a": ReasonMinSize, "c": ReasonMinSize},
	}, {
		name: "a group at its min size has no candidate",
		build: func(c *cluster) {
			c.groups = []testGroup{{id: "g", cpu: "10", price: 1, min: 2}}
			c.node("a", "g")
			c.node("b", "g")
		},
		notCandidate: map[string]string{"a": ReasonMinSize, "b": ReasonMinSize},
	}, {
		name: "delete sets group the removals",
		build: func(c *cluster) {
			for _, n := range []string{"a", "b", "c"} {
				c.node(n, "g")
			}
		},
		opts: func(o *Options) { o.DeleteSetSize = 2 },
		want: []verdict{{Nodes: []string{"a", "b"}}, {Nodes: []string{"c"}}},
	}, {
		name: "the simulation budget leaves nodes for a later loop",
		build: func(c *cluster) {
			for _, n := range []string{"a", "b", "c"} {
				c.node(n, "g")
			}
		},
		opts:         func(o *Options) { o.MaxSimulations = 1 },
		want:         []verdict{{Nodes: []string{"a"}}},
		notCandidate: map[string]string{"b": ReasonOutOfBudget, "c": ReasonOutOfBudget},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{groups: oneGroup}
			tc.build(c)
			opts := DefaultOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			res := NewPlanner(opts).PlanDetailed(context.Background(), c.input(h))
			if diff := cmp.Diff(tc.want, verdicts(res.Candidates)); diff != "" {
				t.Errorf("candidates (-want +got):\n%s\n%+v", diff, res.Candidates)
			}
			for node, reason := range tc.notCandidate {
				if got := res.NotCandidates[node]; !strings.HasPrefix(got, reason) {
					t.Errorf("node %s: reason %q, want %q", node, got, reason)
				}
			}
			for _, cand := range res.Candidates {
				if cand.Reason != disruption.Consolidatable || cand.Message == "" {
					t.Errorf("candidate %+v: want reason %s and a message", cand, disruption.Consolidatable)
				}
			}
		})
	}
}

// TestPlanProtected: a protected node is never a candidate, though its
// pods would fit on the other node.
func TestPlanProtected(t *testing.T) {
	h := newHandle(t)
	for _, tc := range []struct {
		name    string
		protect func(c *cluster, n *apiv1.Node, p *apiv1.Pod)
		deleted bool // the input names the node as being deleted
		reason  string
	}{
		{"scale-down-disabled", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			n.Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
		}, false, ReasonScaleDownDisabled},
		{"do-not-disrupt node", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			n.Annotations = map[string]string{DoNotDisruptAnnotation: "true"}
		}, false, ReasonDoNotDisrupt},
		{"do-not-disrupt pod", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			p.Annotations[DoNotDisruptAnnotation] = "true"
		}, false, ReasonPodDoNotDisrupt},
		{"safe-to-evict false", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			p.Annotations[drain.SafeToEvictAnnotation] = "false"
		}, false, ReasonBlockedByPod},
		{"pod without a controller", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			p.OwnerReferences = nil
		}, false, ReasonBlockedByPod},
		{"younger than the settle time", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			n.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		}, false, ReasonTooYoung},
		{"tainted for deletion", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			n.Spec.Taints = []apiv1.Taint{{Key: clusterstate.ToBeDeletedTaint, Effect: apiv1.TaintEffectNoSchedule}}
		}, false, ReasonBeingDeleted},
		{"being deleted by the engine", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {}, true, ReasonBeingDeleted},
		{"not ready", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			n.Status.Conditions[0].Status = apiv1.ConditionFalse
		}, false, ReasonNotReady},
		{"capacity booked in the loop", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			c.extra = append(c.extra, testbuild.Pod("booked").Req("1", "").On(n.Name).Obj())
		}, false, ReasonBooked},
		{"a group on reserved capacity", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			c.groups = slices.Clone(c.groups)
			c.groups[0].reserved = true
		}, false, ReasonReserved},
		{"held by a ProvisioningRequest", func(c *cluster, n *apiv1.Node, p *apiv1.Pod) {
			c.held = map[string]string{n.Name: "held for ProvisioningRequest ns/req"}
		}, false, ReasonProtected + ": held for ProvisioningRequest ns/req"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{groups: oneGroup}
			n := c.node("n1", "g").Obj()
			p := c.pod("p", "web", "1", "n1").Obj()
			c.node("other", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
			tc.protect(c, n, p)
			in := c.input(h)
			if tc.deleted {
				in.Deleting = map[string]bool{"n1": true}
			}
			res := NewPlanner(DefaultOptions()).PlanDetailed(context.Background(), in)
			if len(res.Candidates) != 0 {
				t.Errorf("candidates %+v, want none", res.Candidates)
			}
			if got := res.NotCandidates["n1"]; !strings.HasPrefix(got, tc.reason) {
				t.Errorf("reason %q, want %q", got, tc.reason)
			}
		})
	}
	// The same cluster unprotected: n1 is a candidate.
	c := &cluster{groups: oneGroup}
	c.node("n1", "g")
	c.pod("p", "web", "1", "n1")
	c.node("other", "g").Obj().Annotations = map[string]string{ScaleDownDisabledAnnotation: "true"}
	if got := verdicts(NewPlanner(DefaultOptions()).Plan(context.Background(), c.input(h))); len(got) != 1 {
		t.Errorf("unprotected: candidates %+v, want n1", got)
	}
}

// steppingClock moves on by step at each reading.
type steppingClock struct {
	t    time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *steppingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestPlanTimeBudget: once Options.Timeout has passed, no more node is
// simulated.
func TestPlanTimeBudget(t *testing.T) {
	h := newHandle(t)
	c := &cluster{groups: oneGroup}
	for _, n := range []string{"a", "b", "c"} {
		c.node(n, "g")
	}
	opts := DefaultOptions()
	opts.Timeout = 2 * time.Second
	// Read once for the deadline, then once per node before its simulation.
	clk := &steppingClock{t: now, step: time.Second}
	res := NewPlanner(opts, WithClock(clk)).PlanDetailed(context.Background(), c.input(h))
	if diff := cmp.Diff([]verdict{{Nodes: []string{"a"}}}, verdicts(res.Candidates)); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}
	for _, n := range []string{"b", "c"} {
		if got := res.NotCandidates[n]; got != ReasonOutOfBudget {
			t.Errorf("node %s: reason %q, want %q", n, got, ReasonOutOfBudget)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for name, mutate := range map[string]func(o *Options){
		"negative settle time":  func(o *Options) { o.SettleTime = -time.Second },
		"ratio above 1":         func(o *Options) { o.MinSavingRatio = 1.5 },
		"no node per set":       func(o *Options) { o.MaxNodesPerReplacement = 0 },
		"no simulation":         func(o *Options) { o.MaxSimulations = 0 },
		"delete set size 0":     func(o *Options) { o.DeleteSetSize = 0 },
		"negative PDB weight":   func(o *Options) { o.PDBBlockedPodWeight = -1 },
		"negative saving /hour": func(o *Options) { o.MinSavingPerHour = -1 },
	} {
		o := DefaultOptions()
		mutate(&o)
		if o.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
