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
// and a protection hook (ProvisioningRequest bookings).
type DisruptionInputs struct {
	Sources   []disruption.Source
	Budget    disruption.Budget
	Protected func(nodeName string) (bool, string)
}

// addDisruption adds the disruption engine to the loop's repairs, and its
// sections to the status ConfigMap (status, when written), when node
// healing is on or some source is given, never in a read-only loop
// (explain); it returns the engine (nil when off), which sources that run
// elsewhere in the loop Offer to.
func addDisruption(ctx context.Context, opts config.Options, in Inputs, procs *processors.Set,
	status *clusterstate.StatusWriter) (*disruption.Engine, error) {
	sources := append(DisruptionSources(opts, in.Provider), in.Disruption.Sources...)
	if in.ReadOnly || (!opts.NodeHealingEnabled && len(sources) == 0 && !opts.Disruption.ConsolidationEnabled) {
		return nil, nil
	}
	dopts, err := HealingOptions(opts)
	if err != nil {
		return nil, err
	}
	dopts.Sources, dopts.Budget, dopts.Protected = sources, in.Disruption.Budget, in.Disruption.Protected
	if dopts.Budget == nil && len(opts.Disruption.Budgets) > 0 {
		set, err := DisruptionBudgets(opts)
		if err != nil {
			return nil, err
		}
		dopts.Budget = set
	}
	engine := disruption.New(dopts, in.Client, in.Provider, in.Recorder, in.Metrics.Registerer())
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
