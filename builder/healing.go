package builder

import (
	"errors"
	"fmt"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// HealingOptions turns the flags into the disruption engine's options
// (node healing's, and the engine's own), reading and checking the hooks
// file; every problem is reported. Healing (the Unhealthy reason) is on
// with --node-healing-enabled.
func HealingOptions(o config.Options) (disruption.Options, error) {
	h := disruption.Options{Healing: o.NodeHealingEnabled, MaxConcurrent: o.MaxConcurrentHeals, Cooldown: o.NodeHealingCooldown,
		MaxUnhealthyPercent: o.NodeHealingMaxUnhealthyPercent, DryRun: o.NodeHealingDryRun,
		ReplaceFirst: o.NodeHealingReplaceFirst, MaxPodEvictionTime: o.MaxPodEvictionTime,
		MaxNodeProvisionTime: o.NodeGroupDefaults.MaxNodeProvisionTime, Namespace: o.Namespace,
		SettleTime: o.DisruptionSettleTime}
	var errs []error
	for _, s := range o.NodeHealingPolicies {
		p, err := disruption.ParsePolicy(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--node-healing-policy: %w", err))
			continue
		}
		h.Policies = append(h.Policies, p)
	}
	hooks, err := disruption.LoadHooks(o.NodeHealingHooksConfig)
	if err != nil {
		errs = append(errs, err)
	}
	h.Hooks = hooks
	if err := h.Validate(); err != nil {
		errs = append(errs, err)
	}
	return h, errors.Join(errs...)
}
