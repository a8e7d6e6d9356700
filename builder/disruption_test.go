package builder

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/consolidation"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/processors/provreqs"
)

type noSource struct{}

func (noSource) Reason() disruption.Reason { return disruption.Drifted }

func (noSource) Propose(context.Context, *processors.Loop) []disruption.Candidate { return nil }

// TestDisruptionEngineRunsWithHealingOrASource: the engine is a repair of
// the loop when healing is on or a source is given, and absent otherwise.
func TestDisruptionEngineRunsWithHealingOrASource(t *testing.T) {
	for _, tc := range []struct {
		name     string
		healing  bool
		sources  []disruption.Source
		readOnly bool
		want     bool
	}{{"off", false, nil, false, false}, {"healing", true, nil, false, true}, {"a source", false, []disruption.Source{noSource{}}, false, true},
		{"read-only", true, []disruption.Source{noSource{}}, true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := config.Defaults()
			opts.NodeHealingEnabled = tc.healing
			in := Inputs{Opts: opts, Client: fake.NewSimpleClientset(), Provider: cpfake.NewProvider(),
				Recorder: record.NewFakeRecorder(1), Metrics: metrics.New(prometheus.NewRegistry()),
				Disruption: DisruptionInputs{Sources: tc.sources}, ReadOnly: tc.readOnly}
			var procs processors.Set
			engine, err := addDisruption(context.Background(), opts, in, &procs, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := engine != nil && len(procs.Repairs) == 1; got != tc.want {
				t.Errorf("engine %v, repairs %d; want the engine: %v", engine != nil, len(procs.Repairs), tc.want)
			}
		})
	}
}

type fakeHolder map[string]string

func (h fakeHolder) Holding(node string) (bool, string) { why, ok := h[node]; return ok, why }

func (fakeHolder) ProcessPods(_ context.Context, _ *processors.Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	return pods
}

// The ProvisioningRequests' processor holds nodes for the engine.
var _ holder = (*provreqs.Requests)(nil)

// TestProtectionsIncludeTheRequestsHolds: the engine's Protected hook
// answers for the nodes a pod-list processor holds (the
// ProvisioningRequests'), and for those of the given hook, first.
func TestProtectionsIncludeTheRequestsHolds(t *testing.T) {
	procs := processors.Set{PodLists: []processors.PodListProcessor{processors.ScaleUpDelay{},
		fakeHolder{"n1": "ProvisioningRequest ns/a: a node of the all-or-nothing request"}}}
	holders := bookingHolders(procs)
	if len(holders) != 1 {
		t.Fatalf("%d holders found, want the one", len(holders))
	}
	given := func(n string) (bool, string) { return n == "n2" || n == "n1", "given" }
	for _, tc := range []struct {
		name string
		hook func(string) (bool, string)
		node string
		want bool
		why  string
	}{
		{"held by a request", protections(nil, holders...), "n1", true, "ProvisioningRequest ns/a: a node of the all-or-nothing request"},
		{"not held", protections(nil, holders...), "n3", false, ""},
		{"the given hook first", protections(given, holders...), "n1", true, "given"},
		{"the given hook alone", protections(given, holders...), "n2", true, "given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := tc.hook(tc.node)
			if ok != tc.want || why != tc.why {
				t.Errorf("%s: got (%v, %q), want (%v, %q)", tc.node, ok, why, tc.want, tc.why)
			}
		})
	}
	if protections(nil) != nil {
		t.Error("no hook and no holder: want no Protected hook")
	}
}

// proposing proposes each of nodes alone, replaced by one of group.
type proposing struct {
	reason disruption.Reason
	group  string
	nodes  []string
}

func (s proposing) Reason() disruption.Reason { return s.reason }

func (s proposing) Propose(context.Context, *processors.Loop) []disruption.Candidate {
	var out []disruption.Candidate
	for _, n := range s.nodes {
		out = append(out, disruption.Candidate{Nodes: []string{n}, Message: string(s.reason) + " " + n,
			Replacement: []disruption.Replacement{{Group: s.group, Count: 1}}})
	}
	return out
}

type budgetOf int

func (b budgetOf) Allowed(_ string, _ disruption.Reason, _, disrupting int, _ time.Time) int {
	return max(0, int(b)-disrupting)
}

// TestDisruptionExplainerFollowsTheIntake: each node's verdict per reason,
// in the engine's order: a plan in flight, an earlier reason, the
// protections (annotations, the settle time, the Protected hook), the
// budget, or it starts; and "no" for the nodes a source did not propose.
func TestDisruptionExplainerFollowsTheIntake(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	provider := cpfake.NewProvider()
	provider.AddNodeGroup("a", 0, 10, 7, nil)
	var nodes []*apiv1.Node
	for _, name := range []string{"busy", "dnd", "young", "booked", "first", "second", "both", "fine"} {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		switch name {
		case "dnd":
			n.Annotations = map[string]string{disruption.DoNotDisrupt: "true"}
		case "young":
			n.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		}
		provider.AddNode("a", n)
		nodes = append(nodes, n)
	}
	rec := explain.NewRecorder()
	x := &disruptionExplainer{rec: rec, provider: provider, budget: budgetOf(3), settle: 5 * time.Minute,
		protected: func(n string) (bool, string) { return n == "booked", "ProvisioningRequest ns/a: held" },
		inFlight:  func() map[string]disruption.Reason { return map[string]disruption.Reason{"busy": disruption.Drifted} },
		sources: []disruption.Source{
			proposing{disruption.Drifted, "a", []string{"busy", "dnd", "young", "booked", "first", "second", "both"}},
			proposing{disruption.Expired, "a", []string{"both"}},
		}}
	rec.BeginLoop(now)
	explainRepair{x}.Repair(context.Background(), &processors.Loop{Now: now, Nodes: nodes})
	rec.EndLoop()

	type verdict struct{ Reason, Decision, HeldBy, Hold string }
	want := map[string][]verdict{
		"busy":   {{"drifted", explain.DecisionInFlight, "", ""}, {"expired", explain.DecisionNo, "", ""}},
		"dnd":    {{"drifted", explain.DecisionHeld, explain.HeldByProtection, "node dnd: the node carries karpenter.sh/do-not-disrupt"}, {"expired", explain.DecisionNo, "", ""}},
		"young":  {{"drifted", explain.DecisionHeld, explain.HeldByProtection, "node young: the node is younger than the settle time"}, {"expired", explain.DecisionNo, "", ""}},
		"booked": {{"drifted", explain.DecisionHeld, explain.HeldByProtection, "node booked: ProvisioningRequest ns/a: held"}, {"expired", explain.DecisionNo, "", ""}},
		// Expired is served before drifted: both goes for expired, and
		// starts (busy is in flight: 2 of the budget of 3 taken).
		"both": {{"drifted", explain.DecisionHeld, explain.HeldByEarlierReason, "node both goes for expired, served first"},
			{"expired", explain.DecisionStarts, "", ""}},
		// The budget's last node goes to first; second waits.
		"first": {{"drifted", explain.DecisionStarts, "", ""}, {"expired", explain.DecisionNo, "", ""}},
		"second": {{"drifted", explain.DecisionHeld, explain.HeldByBudget,
			"node group a: 3 of its 8 nodes being disrupted; its budget for drifted allows 0 more, the candidate takes 1"},
			{"expired", explain.DecisionNo, "", ""}},
		"fine": {{"drifted", explain.DecisionNo, "", ""}, {"expired", explain.DecisionNo, "", ""}},
	}
	got := map[string][]verdict{}
	for name := range want {
		v, _, _, ok := rec.Node(name)
		if !ok {
			t.Fatalf("node %s not explained", name)
		}
		for _, d := range v.Disruptions {
			got[name] = append(got[name], verdict{d.Reason, d.Decision, d.HeldBy, d.Hold})
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	v, _, _, _ := rec.Node("first")
	if d := v.Disruptions[0]; d.Why != "drifted first" || d.Replacement != "1 of a" {
		t.Errorf("first: why %q, replacement %q", d.Why, d.Replacement)
	}
}

// TestExplainConsolidation: a plan's candidates are proposed with their
// saving and replacement, the other nodes told why not; nodes being deleted
// are left to the engine's verdicts.
func TestExplainConsolidation(t *testing.T) {
	rec := explain.NewRecorder()
	rec.BeginLoop(time.Now())
	ExplainConsolidation(rec, consolidation.Result{
		Candidates: []disruption.Candidate{{Reason: disruption.Consolidatable, Nodes: []string{"a", "b"}, SavingPerHour: 0.5,
			Replacement: []disruption.Replacement{{Group: "small", Count: 1}}, Message: "two nodes by one cheaper"}},
		NotCandidates: map[string]string{"c": consolidation.ReasonBooked, "d": consolidation.ReasonBeingDeleted}})
	rec.EndLoop()
	v, _, _, _ := rec.Node("b")
	want := []explain.DisruptionVerdict{{Node: "b", Reason: "consolidatable", Decision: explain.DecisionProposed,
		Why: "two nodes by one cheaper", Nodes: []string{"a", "b"}, SavingPerHour: 0.5, Replacement: "1 of small"}}
	if diff := cmp.Diff(want, v.Disruptions); diff != "" {
		t.Errorf("b (-want +got):\n%s", diff)
	}
	if v, _, _, _ := rec.Node("c"); len(v.Disruptions) != 1 || v.Disruptions[0].Why != consolidation.ReasonBooked ||
		v.Disruptions[0].Decision != explain.DecisionNo {
		t.Errorf("c: %+v, want no for %s", v.Disruptions, consolidation.ReasonBooked)
	}
	if _, _, _, ok := rec.Node("d"); ok {
		t.Error("d, being deleted, has a consolidation verdict")
	}
}
