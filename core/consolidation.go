package core

import (
	"context"
	"errors"
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/consolidation"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	simdrain "k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// Consolidation is the loop's consolidation step (--consolidation-enabled):
// after the scale-down, on the loop's scale-up session (its snapshot holds
// what the scale-up placed and booked), the planner proposes nodes to
// remove, or to replace by cheaper capacity; the disruption engine is
// offered the plan and carries it out from its next repair on, within its
// budgets. The nodes scale-down is removing and the engine's own are left
// out. Scale-down's unneeded nodes are candidates like any other: leaving
// them to scale-down held consolidation back for the whole unneeded time
// (their pods took the room of the nodes that stay first, so nothing else
// fit: docs/benchmarks.md, "Consolidation on the control plane"); scale-down
// leaves alone a node the engine took (its cordon writes the
// scale-down-disabled annotation and its taint, which scale-down's own
// taint write checks on the Node as read before it).
type Consolidation struct {
	Planner *consolidation.Planner
	Rules   *simdrain.Rules
	// Offer hands the plan to the disruption engine (it replaces the
	// previous plan).
	Offer func(reason disruption.Reason, cands []disruption.Candidate)
	// InFlight names the nodes the engine is disrupting, with the reason
	// each goes for (nil: none); Replacing those whose plan asks for new
	// capacity (nil: none).
	InFlight  func() map[string]disruption.Reason
	Replacing func() map[string]bool
	// Protected names the nodes the engine keeps from the voluntary reasons
	// besides the planner's own protections (a ProvisioningRequest's), and
	// why; nil: none.
	Protected func(node string) (bool, string)
	// Explain, when set, gets each plan (the explainer's verdicts).
	Explain func(consolidation.Result)
	// Marks, when set, keeps the consolidation-candidate taint on exactly
	// the plan's nodes (nil: none written, as in a read-only loop). With a
	// nil Planner the step only removes the marks a run with consolidation
	// on left behind.
	Marks *consolidation.Marks
	// BudgetLeft, when set, says per node group how many more nodes the
	// engine's budgets let start being disrupted now (the planner sizes its
	// replacements with it).
	BudgetLeft func(ctx context.Context, nodes []*apiv1.Node, now time.Time) map[string]int
}

// WithConsolidation adds the consolidation step.
func WithConsolidation(c *Consolidation) AutoscalerOption {
	return func(a *Autoscaler) { a.consolidation = c }
}

// beforeScaleDown opens a what-if level on the session's snapshot when the
// consolidation step plans in this loop, and returns what drops it again.
// Scale-down's simulation keeps its removals in the session (each one counts
// on the room the earlier ones left); left there, scale-down's unneeded
// nodes were gone from the planner's simulation (NotInSimulation: neither
// candidates nor destinations) and their pods had taken the room of the
// nodes that stay first, and consolidation stalled for the whole unneeded
// time (docs/benchmarks.md, "Consolidation on the control plane"). The
// nodes scale-down actually removes are left out by name (Removing).
func (a *Autoscaler) beforeScaleDown(session *scaleup.Session) (drop func()) {
	c := a.consolidation
	if c == nil || c.Planner == nil || session == nil {
		return func() {}
	}
	snap := session.Simulator().Snapshot()
	snap.Fork()
	return snap.Revert
}

// consolidate runs the consolidation planner on the loop's session and
// offers its candidates to the engine.
func (a *Autoscaler) consolidate(ctx context.Context, obs *Observation, session *scaleup.Session) {
	c := a.consolidation
	if c == nil || session == nil {
		return
	}
	if c.Planner == nil {
		c.Marks.Update(ctx, obs.Nodes, nil)
		return
	}
	start := a.clock.Now()
	deleting := map[string]bool{}
	if a.scaleDn != nil {
		for n := range a.scaleDn.Removing() {
			deleting[n] = true
		}
	}
	// The engine's nodes are neither candidates nor destinations; their
	// pods take their room first in the plan's simulation. Those it
	// consolidates are offered again while their reason holds, or it
	// cancels them before their drain (Offer): a removal without new
	// capacity holds while its pods still fit on the nodes that stay (the
	// plan says which do not); one with new capacity is kept (its pods
	// fit only once that has come), the engine re-checking its
	// protections.
	inFlight := map[string]disruption.Reason{}
	if c.InFlight != nil {
		inFlight = c.InFlight()
	}
	replacing := map[string]bool{}
	if c.Replacing != nil {
		replacing = c.Replacing()
	}
	for n := range inFlight {
		deleting[n] = true
	}
	in := consolidation.Input{Now: obs.Now, Sim: session.Simulator(), Nodes: obs.Nodes, Pods: obs.ScheduledPods,
		Groups: a.consolidationGroups(session), Pricing: a.pricing(ctx), Rules: c.Rules, Deleting: deleting,
		Protected: c.Protected}
	if c.BudgetLeft != nil {
		in.BudgetLeft = c.BudgetLeft(ctx, obs.Nodes, obs.Now)
	}
	if c.Rules != nil {
		pdbs, err := c.Rules.NewPDBs()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Consolidation skipped this loop: reading PodDisruptionBudgets")
			return
		}
		in.PDBs = pdbs
	}
	res := c.Planner.PlanDetailed(ctx, in)
	if c.Explain != nil {
		c.Explain(res)
	}
	cands := res.Candidates
	var kept []disruption.Candidate
	for n, r := range inFlight {
		if r != disruption.Consolidatable {
			continue
		}
		if res.Unsettled[n] && !replacing[n] {
			klog.FromContext(ctx).V(2).Info("Consolidation no longer holds: the pods of a node in flight fit on no node that stays",
				"node", n)
			continue
		}
		kept = append(kept, disruption.Candidate{Reason: r, Nodes: []string{n}, Message: "consolidation in flight"})
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Nodes[0] < kept[j].Nodes[0] })
	offered := append(kept, cands...)
	c.Offer(disruption.Consolidatable, offered)
	c.Marks.Update(ctx, obs.Nodes, consolidation.MarkedNodes(offered))
	took := a.clock.Since(start)
	observeDuration(a.metrics, metrics.FunctionConsolidation, took)
	klog.FromContext(ctx).V(2).Info("Consolidation planned", "candidates", len(cands), "took", took.Round(time.Millisecond))
}

// consolidationGroups describes the autoscaled node groups for the planner.
func (a *Autoscaler) consolidationGroups(session *scaleup.Session) []consolidation.Group {
	var out []consolidation.Group
	for _, gs := range a.state.Groups() {
		g := consolidation.Group{ID: gs.NodeGroup.Id(), Size: gs.Target, Min: gs.NodeGroup.MinSize(),
			Max: gs.NodeGroup.MaxSize(), Template: session.Template(gs.NodeGroup.Id())}
		if g.Template != nil && g.Template.Node != nil {
			g.Reserved = g.Template.Node.Labels[cloudprovider.CapacityReservationIDLabel] != ""
		}
		for _, n := range gs.Nodes {
			g.Nodes = append(g.Nodes, n.Name)
		}
		out = append(out, g)
	}
	return out
}

// pricing is the provider's pricing model, or nil when it has none (the
// plan is then delete-only).
func (a *Autoscaler) pricing(ctx context.Context) cloudprovider.PricingModel {
	p, err := a.provider.Pricing(ctx)
	if err != nil {
		if !errors.Is(err, cloudprovider.ErrNotImplemented) {
			klog.FromContext(ctx).V(2).Info("No pricing model; consolidation deletes only", "err", err)
		}
		return nil
	}
	return p
}
