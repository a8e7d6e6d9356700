package builder

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/healing"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// addHealer adds node healing to the loop's repairs and its sections to the
// status ConfigMap (status, when written).
func addHealer(ctx context.Context, opts config.Options, in Inputs, procs *processors.Set, status *clusterstate.StatusWriter) error {
	hopts, err := HealingOptions(opts)
	if err != nil {
		return err
	}
	healer := healing.New(hopts, in.Client, in.Provider, in.Recorder, in.Metrics.Registerer())
	procs.Repairs = append(procs.Repairs, healer)
	if status != nil {
		status.Sections = healer.StatusSections
	}
	klog.FromContext(ctx).Info("Node healing enabled", "policies", healing.PolicyStrings(hopts.Policies), "hooks", len(hopts.Hooks),
		"maxConcurrent", hopts.MaxConcurrent, "dryRun", hopts.DryRun)
	return nil
}

// HealingOptions turns the flags into the Healer's options, reading and
// checking the hooks file; every problem is reported.
func HealingOptions(o config.Options) (healing.Options, error) {
	h := healing.Options{MaxConcurrent: o.MaxConcurrentHeals, Cooldown: o.NodeHealingCooldown,
		MaxUnhealthyPercent: o.NodeHealingMaxUnhealthyPercent, DryRun: o.NodeHealingDryRun,
		ReplaceFirst: o.NodeHealingReplaceFirst, MaxPodEvictionTime: o.MaxPodEvictionTime,
		MaxNodeProvisionTime: o.NodeGroupDefaults.MaxNodeProvisionTime, Namespace: o.Namespace}
	var errs []error
	for _, s := range o.NodeHealingPolicies {
		p, err := healing.ParsePolicy(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--node-healing-policy: %w", err))
			continue
		}
		h.Policies = append(h.Policies, p)
	}
	hooks, err := healing.LoadHooks(o.NodeHealingHooksConfig)
	if err != nil {
		errs = append(errs, err)
	}
	h.Hooks = hooks
	if err := h.Validate(); err != nil {
		errs = append(errs, err)
	}
	return h, errors.Join(errs...)
}
