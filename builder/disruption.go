package builder

import (
	"context"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// DisruptionInputs are what the disruption engine gets besides the flags:
// the reason sources asked every loop (consolidation, drift, expiry: wired
// by whoever builds the loop), the budget (nil: disruption.DefaultBudget)
// and a protection hook besides the ProvisioningRequests' (the nodes they
// hold are protected whenever the loop's processors include them).
type DisruptionInputs struct {
	Sources   []disruption.Source
	Budget    disruption.Budget
	Protected func(nodeName string) (bool, string)
}

// holder is what holds nodes for someone (the ProvisioningRequests:
// provreqs.Requests.Holding): the engine keeps those from the voluntary
// reasons.
type holder interface {
	Holding(node string) (bool, string)
}

// bookingHolders are the loop's processors that hold nodes (the
// ProvisioningRequests', when on: their Holds among the pod lists, the
// nodes their bookings landed on among the scale-up status processors).
func bookingHolders(procs processors.Set) []holder {
	var out []holder
	for _, p := range procs.PodLists {
		if h, ok := p.(holder); ok {
			out = append(out, h)
		}
	}
	for _, p := range procs.ScaleUpStatus {
		if h, ok := p.(holder); ok {
			out = append(out, h)
		}
	}
	return out
}

// protections is the engine's Protected hook: the given one (nil: none)
// and every holder's, the first that protects the node answering why.
func protections(given func(string) (bool, string), holders ...holder) func(string) (bool, string) {
	if len(holders) == 0 {
		return given
	}
	return func(node string) (bool, string) {
		if given != nil {
			if ok, why := given(node); ok {
				return true, why
			}
		}
		for _, h := range holders {
			if ok, why := h.Holding(node); ok {
				return true, why
			}
		}
		return false, ""
	}
}

// addDisruption adds the disruption engine to the loop's repairs, and its
// sections to the status ConfigMap (status, when written), when node
// healing is on or some source is given, never in a read-only loop
// (explain); it returns the engine (nil when off), which sources that run
// elsewhere in the loop Offer to. With an explainer, the nodes' verdicts
// for the sources' reasons are recorded each loop: before the engine's
// repair, or in a read-only loop once the scale-up's processors are done.
func addDisruption(ctx context.Context, opts config.Options, in Inputs, procs *processors.Set,
	status *clusterstate.StatusWriter, state *clusterstate.Registry) (*disruption.Engine, error) {
	sources := withGroupDisruption(ctx, opts, in, append(DisruptionSources(opts, in.Provider), in.Disruption.Sources...))
	on := !in.ReadOnly && (opts.NodeHealingEnabled || len(sources) > 0 || opts.Disruption.ConsolidationEnabled)
	explainOnly := in.ReadOnly && in.Explainer != nil && len(sources) > 0
	if opts.EnableProvisioningRequests && (len(sources) > 0 || opts.Disruption.ConsolidationEnabled) && (on || explainOnly) {
		// Before the explainer among the scale-up status processors: it
		// reads the loop's bookings.
		procs.ScaleUpStatus = append(procs.ScaleUpStatus, &bookedNodes{})
	}
	if !on {
		if explainOnly {
			dopts, err := disruptionOptions(opts, in, sources, *procs)
			if err != nil {
				return nil, err
			}
			x := newDisruptionExplainer(in, dopts, nil)
			procs.ScaleUpStatus = append(procs.ScaleUpStatus, explainAfterScaleUp{x})
		}
		return nil, nil
	}
	dopts, err := disruptionOptions(opts, in, sources, *procs)
	if err != nil {
		return nil, err
	}
	if state != nil {
		// A replacement whose group failed or backed off ends the wait at
		// once; a backed-off group is not asked.
		dopts.ReplacementHealth = NewReplacementHealth(state)
		// A replacement is Ready as the registry judges it: no startup
		// taint left, its devices published.
		dopts.Readiness = NewReadiness(state, clusterstate.NewTaints(TaintOptions(opts)))
	}
	engine := disruption.New(dopts, in.Client, in.Provider, in.Recorder, in.Metrics.Registerer())
	if in.Explainer != nil && len(sources) > 0 {
		procs.Repairs = append(procs.Repairs, explainRepair{newDisruptionExplainer(in, dopts, engine.InFlight)})
	}
	procs.Repairs = append(procs.Repairs, engine)
	if status != nil {
		status.Sections = engine.StatusSections
	}
	var reasons []disruption.Reason
	for _, s := range dopts.Sources {
		reasons = append(reasons, s.Reason())
	}
	logger := klog.FromContext(ctx)
	logger.Info("Disruption engine enabled", "sources", reasons, "consolidation", opts.Disruption.ConsolidationEnabled,
		"budgets", opts.Disruption.Budgets, "settleTime", dopts.SettleTime)
	if dopts.Healing {
		logger.Info("Node healing enabled", "policies", disruption.PolicyStrings(dopts.Policies), "hooks", len(dopts.Hooks),
			"maxConcurrent", dopts.MaxConcurrent, "dryRun", dopts.DryRun)
	}
	return engine, nil
}

// disruptionOptions are the engine's options: the flags', the sources, the
// budget (--disruption-budget unless given) and the protections.
func disruptionOptions(opts config.Options, in Inputs, sources []disruption.Source,
	procs processors.Set) (disruption.Options, error) {
	dopts, err := HealingOptions(opts)
	if err != nil {
		return dopts, err
	}
	dopts.Sources, dopts.Budget = sources, in.Disruption.Budget
	dopts.Protected = protections(in.Disruption.Protected, bookingHolders(procs)...)
	if dopts.Budget == nil && len(opts.Disruption.Budgets) > 0 {
		set, err := DisruptionBudgets(opts)
		if err != nil {
			return dopts, err
		}
		dopts.Budget = set
	}
	// The node groups' own budgets (their DisruptionBudget option) take
	// the place of these where they apply.
	dopts.Budget = perGroupBudget(opts, in.Provider, dopts.Budget)
	return dopts, nil
}

// newDisruptionExplainer explains the engine of dopts; inFlight is its
// plans in flight (nil: none known).
func newDisruptionExplainer(in Inputs, dopts disruption.Options,
	inFlight func() map[string]disruption.Reason) *disruptionExplainer {
	b := dopts.Budget
	if b == nil {
		b = disruption.DefaultBudget{}
	}
	return &disruptionExplainer{rec: in.Explainer, provider: in.Provider, sources: dopts.Sources, budget: b,
		protected: dopts.Protected, settle: dopts.SettleTime, inFlight: inFlight}
}
