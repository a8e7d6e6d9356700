package builder

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// groupsWithOptions: "short" (lifetime 1h, budget nodes=1), "long"
// (lifetime 10h), "bad" (lifetime 1h, a budget that does not parse),
// "plain" (no options); each with n Ready nodes created 2h before now.
func groupsWithOptions(t *testing.T, now time.Time, n int, lifetimes bool) (*cpfake.Provider, []*apiv1.Node) {
	t.Helper()
	p := cpfake.NewProvider()
	var nodes []*apiv1.Node
	for _, g := range []struct {
		id       string
		lifetime time.Duration
		budget   string
	}{{"short", time.Hour, "nodes=1"}, {"long", 10 * time.Hour, ""}, {"bad", time.Hour, "nodes=several"}, {"plain", -1, ""}} {
		ng := p.AddNodeGroup(g.id, 0, 100, n, nil)
		if g.lifetime >= 0 {
			o := config.Defaults().NodeGroupDefaults
			o.DisruptionBudget = g.budget
			if lifetimes {
				o.MaxNodeLifetime = g.lifetime
			}
			ng.SetOptions(&o)
		}
		for i := 0; i < n; i++ {
			node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: g.id + "-" + string(rune('a'+i)),
				CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour))},
				Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}}
			p.AddNode(g.id, node)
			nodes = append(nodes, node)
		}
	}
	return p, nodes
}

// TestGroupLifetimes: without --max-node-lifetime, the expiry source is
// wired when a group lists a lifetime of its own at start-up, or when
// another voluntary reason is on; it proposes only the nodes past their own group's
// lifetime. With the flag, a group without a lifetime of its own has the
// flag's. Without either, nothing is wired (the engine stays off).
func TestGroupLifetimes(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	expired := func(t *testing.T, sources []disruption.Source, nodes []*apiv1.Node) []string {
		t.Helper()
		var out []string
		for _, s := range sources {
			if s.Reason() != disruption.Expired {
				continue
			}
			for _, c := range s.Propose(context.Background(), &processors.Loop{Now: now, Nodes: nodes}) {
				out = append(out, c.Nodes...)
			}
		}
		return out
	}
	build := func(t *testing.T, opts config.Options, p *cpfake.Provider) (*disruption.Engine, []disruption.Source) {
		t.Helper()
		in := Inputs{Opts: opts, Client: fake.NewSimpleClientset(), Provider: p, Recorder: record.NewFakeRecorder(10),
			Metrics: metrics.New(prometheus.NewRegistry())}
		var procs processors.Set
		engine, err := addDisruption(context.Background(), opts, in, &procs, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return engine, withGroupDisruption(context.Background(), opts, in, DisruptionSources(opts, p))
	}

	t.Run("a group's lifetime turns expiry on", func(t *testing.T) {
		p, nodes := groupsWithOptions(t, now, 2, true)
		engine, sources := build(t, config.Defaults(), p)
		if engine == nil {
			t.Fatal("no engine, want one: a group sets a lifetime")
		}
		got := expired(t, sources, nodes)
		want := map[string]bool{"short-a": true, "short-b": true, "bad-a": true, "bad-b": true}
		if len(got) != len(want) {
			t.Errorf("expired %v, want the nodes of short and bad only", got)
		}
		for _, n := range got {
			if !want[n] {
				t.Errorf("%s expired, want only short's and bad's", n)
			}
		}
	})
	t.Run("no lifetime anywhere: engine off", func(t *testing.T) {
		p, _ := groupsWithOptions(t, now, 2, false)
		if engine, sources := build(t, config.Defaults(), p); engine != nil || len(sources) != 0 {
			t.Errorf("engine %v, sources %d; want neither", engine != nil, len(sources))
		}
	})
	t.Run("healing alone, no lifetime: nothing added", func(t *testing.T) {
		p, _ := groupsWithOptions(t, now, 1, false)
		opts := config.Defaults()
		opts.NodeHealingEnabled = true
		if _, sources := build(t, opts, p); len(sources) != 0 {
			t.Errorf("%d sources, want none", len(sources))
		}
	})
	t.Run("another voluntary reason on: groups' lifetimes apply", func(t *testing.T) {
		p, nodes := groupsWithOptions(t, now, 1, false)
		opts := config.Defaults()
		opts.Disruption.ConsolidationEnabled = true
		_, sources := build(t, opts, p)
		if got := expired(t, sources, nodes); len(got) != 0 {
			t.Errorf("expired %v, want none (no lifetime set)", got)
		}
		groups, _ := p.NodeGroups(context.Background())
		groups[0].(*cpfake.NodeGroup).SetOptions(&config.NodeGroupAutoscalingOptions{MaxNodeLifetime: time.Hour})
		if got := expired(t, sources, nodes); len(got) != 1 || got[0] != "short-a" {
			t.Errorf("expired %v, want short-a, whose group set a lifetime since", got)
		}
	})
	t.Run("the flag's lifetime for groups without their own", func(t *testing.T) {
		p, nodes := groupsWithOptions(t, now, 1, true)
		opts := config.Defaults()
		opts.Disruption.MaxNodeLifetime = 90 * time.Minute
		_, sources := build(t, opts, p)
		// plain (no options) takes the flag's 90m; long keeps its 10h.
		// The fake returns the options it holds, so short and bad have 1h.
		got := map[string]bool{}
		for _, n := range expired(t, sources, nodes) {
			got[n] = true
		}
		if !got["plain-a"] || !got["short-a"] || got["long-a"] {
			t.Errorf("expired %v, want plain-a and short-a, not long-a", got)
		}
	})
}

// TestGroupBudgets: the engine's budget answers a group's own budget where
// it parses, the flag's (here the default) elsewhere.
func TestGroupBudgets(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p, _ := groupsWithOptions(t, now, 1, true)
	opts := config.Defaults()
	dopts, err := disruptionOptions(opts, Inputs{Opts: opts, Provider: p}, nil, processors.Set{})
	if err != nil {
		t.Fatal(err)
	}
	lb, ok := dopts.Budget.(disruption.LoopBudget)
	if !ok {
		t.Fatalf("budget %T does not read the groups' budgets", dopts.Budget)
	}
	lb.Refresh(context.Background(), now)
	for _, tc := range []struct {
		group string
		want  int
	}{{"short", 1}, {"long", 3}, {"bad", 3}, {"plain", 3}} {
		if got := lb.Allowed(tc.group, disruption.Expired, 30, 0, now); got != tc.want {
			t.Errorf("%s: %d of 30 nodes allowed, want %d", tc.group, got, tc.want)
		}
	}
}
