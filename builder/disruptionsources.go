package builder

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/budget"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/consolidation"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/lifecycle"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// DisruptionBudgets parses --disruption-budget's values.
func DisruptionBudgets(o config.Options) (budget.Set, error) {
	set, err := budget.ParseSet(o.Disruption.Budgets)
	if err != nil {
		return budget.Set{}, fmt.Errorf("--disruption-budget: %w", err)
	}
	return set, nil
}

// DisruptionSources are the reason sources the flags turn on, besides
// healing's own (drift, expiry); consolidation runs in the loop instead
// (ConsolidationOptions, core.WithConsolidation).
func DisruptionSources(o config.Options, provider cloudprovider.CloudProvider) []disruption.Source {
	var out []disruption.Source
	if o.Disruption.DriftEnabled {
		out = append(out, lifecycle.NewDrift(provider))
	}
	if o.Disruption.MaxNodeLifetime > 0 {
		out = append(out, lifecycle.NewExpiry(provider, o.Disruption.MaxNodeLifetime,
			lifecycle.WithLifetimeFor(groupLifetime(o))))
	}
	return out
}

// ConsolidationOptions maps the --consolidation-* flags.
func ConsolidationOptions(o config.Options) (consolidation.Options, error) {
	d := o.Disruption
	c := consolidation.DefaultOptions()
	c.SettleTime = o.DisruptionSettleTime
	c.MinSavingRatio = d.ConsolidationMinSavingRatio
	c.MinSavingPerHour = d.ConsolidationMinSavingPerHour
	c.MaxNodesPerReplacement = d.ConsolidationMaxNodesPerReplacement
	c.MaxReplacements = d.ConsolidationMaxReplacementsPerLoop
	c.MaxSimulations = d.ConsolidationMaxSimulationsPerLoop
	c.Timeout = d.ConsolidationSimulationTimeout
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("--consolidation-*: %w", err)
	}
	return c, nil
}

// NewDrainRules are the drain rules on informer listers, as scale-down's.
func NewDrainRules(opts config.Options, factory informers.SharedInformerFactory) *drain.Rules {
	return drain.NewRules(DrainOptions(opts), drain.Listers{
		ReplicationControllers: factory.Core().V1().ReplicationControllers().Lister(),
		ReplicaSets:            factory.Apps().V1().ReplicaSets().Lister(),
		StatefulSets:           factory.Apps().V1().StatefulSets().Lister(),
		DaemonSets:             factory.Apps().V1().DaemonSets().Lister(),
		Jobs:                   factory.Batch().V1().Jobs().Lister(),
		PodDisruptionBudgets:   factory.Policy().V1().PodDisruptionBudgets().Lister(),
	})
}

// disruptionExplainer records, each loop, every node's verdict for the
// disruption reasons whose sources the builder knows (drift, expiry): the
// nodes in flight, and for each candidate what the engine's intake does
// with it, in the engine's order (disruption.Reasons): held back by a plan
// in flight or an earlier reason, by a protection (the engine's: upstream's
// and Karpenter's annotations, the settle time, the Protected hook with the
// ProvisioningRequests' holds), by its node group's budget, or started. It
// asks the sources itself (they are pure) and reads the engine's plans in
// flight (inFlight; nil in a read-only loop). It does not know the engine's
// per-node cooldowns (a node whose disruption failed waits
// --node-healing-cooldown before it is proposed again) nor the candidates
// consolidation offers.
type disruptionExplainer struct {
	rec       *explain.Recorder
	provider  cloudprovider.CloudProvider
	sources   []disruption.Source
	budget    disruption.Budget
	protected func(string) (bool, string)
	settle    time.Duration
	inFlight  func() map[string]disruption.Reason
}

// explainRepair records before the engine's repair (live loops).
type explainRepair struct{ x *disruptionExplainer }

func (e explainRepair) Repair(ctx context.Context, loop *processors.Loop) bool {
	e.x.record(ctx, loop)
	return false
}

// explainAfterScaleUp records once the scale-up's processors are done, the
// ProvisioningRequests' holds read (read-only loops: `explain`).
type explainAfterScaleUp struct{ x *disruptionExplainer }

func (e explainAfterScaleUp) ScaleUpDone(ctx context.Context, loop *processors.Loop, _ processors.ScaleUpStatus) {
	e.x.record(ctx, loop)
}

// intake is one loop's view as the engine's intake keeps it.
type intake struct {
	loop       *processors.Loop
	nodes      map[string]*apiv1.Node
	groupOf    map[string]string
	size       map[string]int
	inFlight   map[string]disruption.Reason
	disrupting map[string]int
	claimed    map[string]disruption.Reason
}

func (x *disruptionExplainer) record(ctx context.Context, loop *processors.Loop) {
	if lb, ok := x.budget.(disruption.LoopBudget); ok {
		lb.Refresh(ctx, loop.Now)
	}
	in := &intake{loop: loop, nodes: map[string]*apiv1.Node{}, groupOf: map[string]string{}, size: map[string]int{},
		inFlight: map[string]disruption.Reason{}, disrupting: map[string]int{}, claimed: map[string]disruption.Reason{}}
	for _, n := range loop.Nodes {
		in.nodes[n.Name] = n
		if g, err := x.provider.NodeGroupForNode(ctx, n); err == nil && g != nil {
			in.groupOf[n.Name] = g.Id()
			in.size[g.Id()]++
		}
	}
	if x.inFlight != nil {
		in.inFlight = x.inFlight()
	}
	done := map[disruption.Reason]map[string]bool{}
	for n, r := range in.inFlight {
		in.disrupting[in.groupOf[n]]++
		x.rec.AddDisruption(explain.DisruptionVerdict{Node: n, NodeGroup: in.groupOf[n], Reason: string(r),
			Decision: explain.DecisionInFlight})
		mark(done, r, n)
	}
	by := map[disruption.Reason][]disruption.Candidate{}
	for _, s := range x.sources {
		by[s.Reason()] = append(by[s.Reason()], proposedFor(s.Reason(), s.Propose(ctx, loop))...)
	}
	for _, reason := range disruption.Reasons {
		for _, c := range by[reason] {
			v := explain.DisruptionVerdict{Reason: string(reason), Why: c.Message, SavingPerHour: c.SavingPerHour,
				Replacement: replacementText(c.Replacement)}
			if len(c.Nodes) > 1 {
				v.Nodes = c.Nodes
			}
			v.Decision, v.HeldBy, v.Hold = x.decide(in, c)
			for _, n := range c.Nodes {
				if !done[reason][n] {
					v.Node, v.NodeGroup = n, in.groupOf[n]
					x.rec.AddDisruption(v)
					mark(done, reason, n)
				}
			}
		}
		for _, c := range by[reason] {
			for _, n := range c.Nodes {
				if _, ok := in.claimed[n]; !ok {
					in.claimed[n] = reason
				}
			}
		}
	}
	for _, s := range x.sources {
		ex, explains := s.(nodeExplainer)
		for _, n := range loop.Nodes {
			if g := in.groupOf[n.Name]; g != "" && !done[s.Reason()][n.Name] {
				why := notProposed(s.Reason())
				if explains {
					// Only the nodes the source knows of get a verdict.
					if why = ex.Explain(loop, n.Name); why == "" {
						continue
					}
				}
				x.rec.AddDisruption(explain.DisruptionVerdict{Node: n.Name, NodeGroup: g, Reason: string(s.Reason()),
					Decision: explain.DecisionNo, Why: why})
				mark(done, s.Reason(), n.Name)
			}
		}
	}
}

// nodeExplainer is a source that says itself why it does not propose a
// node ("" for a node it has nothing to say about: no verdict), as the
// run-limit source says when a ProvisioningRequest's node is released.
type nodeExplainer interface {
	Explain(loop *processors.Loop, node string) string
}

func mark(done map[disruption.Reason]map[string]bool, r disruption.Reason, node string) {
	if done[r] == nil {
		done[r] = map[string]bool{}
	}
	done[r][node] = true
}

// proposedFor keeps the candidates of reason, as the engine does.
func proposedFor(reason disruption.Reason, cands []disruption.Candidate) []disruption.Candidate {
	var out []disruption.Candidate
	for _, c := range cands {
		if c.Reason == "" {
			c.Reason = reason
		}
		if c.Reason == reason && len(c.Nodes) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// decide is what the engine's intake does with candidate c (its checks in
// its order); a candidate that starts takes its share of the budgets.
func (x *disruptionExplainer) decide(in *intake, c disruption.Candidate) (decision, heldBy, hold string) {
	count := map[string]int{}
	for _, name := range c.Nodes {
		n, g := in.nodes[name], in.groupOf[name]
		switch {
		case in.inFlight[name] == c.Reason:
			return explain.DecisionInFlight, "", ""
		case in.inFlight[name] != "":
			return explain.DecisionHeld, explain.HeldByEarlierReason,
				fmt.Sprintf("node %s is being disrupted already (%s)", name, in.inFlight[name])
		case in.claimed[name] != "":
			return explain.DecisionHeld, explain.HeldByEarlierReason,
				fmt.Sprintf("node %s goes for %s, served first", name, in.claimed[name])
		case n == nil || g == "" || n.DeletionTimestamp != nil:
			return explain.DecisionHeld, explain.HeldByProtection, fmt.Sprintf("node %s is gone, going or not autoscaled", name)
		}
		if c.Reason != disruption.Interrupted && c.Reason != disruption.ReservationEnding {
			if ok, why := x.protection(n, in.loop); ok {
				return explain.DecisionHeld, explain.HeldByProtection, fmt.Sprintf("node %s: %s", name, why)
			}
		}
		count[g]++
	}
	groups := make([]string, 0, len(count))
	for g := range count {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		if allowed := x.budget.Allowed(g, c.Reason, in.size[g], in.disrupting[g], in.loop.Now); count[g] > allowed {
			return explain.DecisionHeld, explain.HeldByBudget, fmt.Sprintf(
				"node group %s: %d of its %d nodes being disrupted; its budget for %s allows %d more, the candidate takes %d",
				g, in.disrupting[g], in.size[g], c.Reason, max(allowed, 0), count[g])
		}
	}
	for _, g := range groups {
		in.disrupting[g] += count[g]
	}
	return explain.DecisionStarts, "", ""
}

// protection mirrors the engine's protections of a node not in flight.
func (x *disruptionExplainer) protection(n *apiv1.Node, loop *processors.Loop) (bool, string) {
	for _, a := range []string{consolidation.ScaleDownDisabledAnnotation, disruption.DoNotDisrupt} {
		if n.Annotations[a] == "true" {
			return true, "the node carries " + a
		}
	}
	if x.settle > 0 && loop.Now.Sub(n.CreationTimestamp.Time) < x.settle {
		return true, "the node is younger than the settle time"
	}
	for _, p := range loop.ScheduledPods {
		if p.Spec.NodeName != n.Name || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		if p.Annotations[disruption.DoNotDisrupt] == "true" {
			return true, "pod " + p.Namespace + "/" + p.Name + " carries " + disruption.DoNotDisrupt
		}
		if p.Annotations[disruption.SafeToEvict] == "false" {
			return true, "pod " + p.Namespace + "/" + p.Name + " carries " + disruption.SafeToEvict + ": \"false\""
		}
	}
	if x.protected != nil {
		return x.protected(n.Name)
	}
	return false, ""
}

func replacementText(rs []disruption.Replacement) string {
	var out []string
	for _, r := range rs {
		if r.Count > 0 {
			out = append(out, fmt.Sprintf("%d of %s", r.Count, r.Group))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// notProposed says why a source did not propose an autoscaled node.
func notProposed(r disruption.Reason) string {
	switch r {
	case disruption.Drifted:
		return "not drifted: its node group does not report it drifted (or cannot tell), or it is not Ready or being deleted"
	case disruption.Expired:
		return "not expired: younger than its node group's maximum lifetime, or not Ready or being deleted"
	}
	return "not proposed by the " + string(r) + " source"
}

// ExplainConsolidation records a consolidation plan's verdicts for the
// explainer (rec may be nil): each candidate's nodes as proposed (the
// engine decides at its next repair), with the saving, the replacement and
// the planner's message; each other node with why it is no candidate (the
// planner's reason). Nodes being deleted are left to the engine's own
// verdicts (in flight). For the loop's consolidation step to call once it
// planned (core.Consolidation); not wired yet.
func ExplainConsolidation(rec *explain.Recorder, res consolidation.Result) {
	if rec == nil {
		return
	}
	for _, c := range res.Candidates {
		v := explain.DisruptionVerdict{Reason: string(disruption.Consolidatable), Decision: explain.DecisionProposed,
			Why: c.Message, SavingPerHour: c.SavingPerHour, Replacement: replacementText(c.Replacement)}
		if len(c.Nodes) > 1 {
			v.Nodes = c.Nodes
		}
		for _, n := range c.Nodes {
			v.Node = n
			rec.AddDisruption(v)
		}
	}
	names := make([]string, 0, len(res.NotCandidates))
	for n, why := range res.NotCandidates {
		if why != consolidation.ReasonBeingDeleted {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		rec.AddDisruption(explain.DisruptionVerdict{Node: n, Reason: string(disruption.Consolidatable),
			Decision: explain.DecisionNo, Why: res.NotCandidates[n]})
	}
}

// explainConsolidation is the consolidation step's Explain hook: each plan's
// verdicts go to rec (nil, no explainer: no hook).
func explainConsolidation(rec *explain.Recorder) func(consolidation.Result) {
	if rec == nil {
		return nil
	}
	return func(res consolidation.Result) { ExplainConsolidation(rec, res) }
}
