package builder

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/budget"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/lifecycle"
)

// The node groups' own disruption options (config.NodeGroupAutoscalingOptions'
// MaxNodeLifetime and DisruptionBudget), read through NodeGroup.GetOptions
// with the flags' values as the defaults.

// groupOptions returns group's options over the defaults (the flags'
// per-group defaults, with the flags' lifetime and no budget of its own);
// nil when the group has none (ErrNotImplemented, nil) or they cannot be
// read (logged: the defaults hold).
func groupOptions(ctx context.Context, opts config.Options, g cloudprovider.NodeGroup) *config.NodeGroupAutoscalingOptions {
	defaults := opts.NodeGroupDefaults
	defaults.MaxNodeLifetime, defaults.DisruptionBudget = opts.Disruption.MaxNodeLifetime, ""
	o, err := g.GetOptions(ctx, defaults)
	if err != nil {
		if !errors.Is(err, cloudprovider.ErrNotImplemented) {
			klog.FromContext(ctx).V(2).Info("Node group's options not read; the flags' values hold for it",
				"nodeGroup", g.Id(), "err", err)
		}
		return nil
	}
	return o
}

// groupLifetime is the expiry source's LifetimeFunc: the group's
// MaxNodeLifetime option, else def.
func groupLifetime(opts config.Options) lifecycle.LifetimeFunc {
	return func(ctx context.Context, g cloudprovider.NodeGroup, def time.Duration) time.Duration {
		if o := groupOptions(ctx, opts, g); o != nil {
			return o.MaxNodeLifetime
		}
		return def
	}
}

// groupBudgetValues is budget.PerGroup's source: each listed group's
// DisruptionBudget option.
func groupBudgetValues(opts config.Options, provider cloudprovider.CloudProvider) budget.GroupValues {
	return func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		groups, err := provider.NodeGroups(ctx)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			if o := groupOptions(ctx, opts, g); o != nil && o.DisruptionBudget != "" {
				out[g.Id()] = o.DisruptionBudget
			}
		}
		return out, nil
	}
}

// someGroupSetsLifetime reports whether a group the provider lists now
// gives its nodes a lifetime of its own (at start-up: the expiry source is
// then wired even without --max-node-lifetime).
func someGroupSetsLifetime(ctx context.Context, opts config.Options, provider cloudprovider.CloudProvider) bool {
	groups, err := provider.NodeGroups(ctx)
	if err != nil {
		return false
	}
	for _, g := range groups {
		if o := groupOptions(ctx, opts, g); o != nil && o.MaxNodeLifetime > 0 {
			return true
		}
	}
	return false
}

// withGroupDisruption adds what the node groups' own options need: the
// expiry source with per-group lifetimes when --max-node-lifetime is unset
// but another voluntary reason is on (consolidation, another source) or a
// group the provider lists at start-up sets a lifetime of its own. Nothing
// is added otherwise (healing alone included), so that the engine and the
// voluntary reasons' wiring stay as they were unless asked for.
func withGroupDisruption(ctx context.Context, opts config.Options, in Inputs, sources []disruption.Source) []disruption.Source {
	if in.Provider == nil || opts.Disruption.MaxNodeLifetime > 0 {
		return sources
	}
	for _, s := range sources {
		if s.Reason() == disruption.Expired {
			return sources
		}
	}
	// The Capacity Blocks' source is on by default with the aws provider:
	// it turns no voluntary reason on.
	voluntaryOn := opts.Disruption.ConsolidationEnabled
	for _, s := range sources {
		voluntaryOn = voluntaryOn || s.Reason() != disruption.ReservationEnding
	}
	if !voluntaryOn && !someGroupSetsLifetime(ctx, opts, in.Provider) {
		return sources
	}
	return append(sources, lifecycle.NewExpiry(in.Provider, 0, lifecycle.WithLifetimeFor(groupLifetime(opts))))
}

// perGroupBudget wraps b (nil: the default budget) so that the node
// groups' own budgets take its place where they apply.
func perGroupBudget(opts config.Options, provider cloudprovider.CloudProvider, b disruption.Budget) disruption.Budget {
	if provider == nil {
		return b
	}
	return budget.NewPerGroup(b, groupBudgetValues(opts, provider))
}
