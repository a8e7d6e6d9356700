package main

// registerHealing adds the node healing and disruption engine flags (not
// upstream's).
func (c *commandLine) registerHealing() {
	o, fs := &c.opts, c.fs
	fs.BoolVar(&o.NodeHealingEnabled, "node-healing-enabled", o.NodeHealingEnabled,
		"Replace failed worker nodes: cordon, drain, delete by name, create a replacement (FAQ: node healing). Not upstream.")
	fs.StringArrayVar(&o.NodeHealingPolicies, "node-healing-policy", o.NodeHealingPolicies,
		"A node condition that makes a node need healing once held that long, <ConditionType>=<True|False|Unknown>:<duration>; repeatable (giving it replaces the defaults). Not upstream.")
	fs.StringVar(&o.NodeHealingHooksConfig, "node-healing-hooks-config", o.NodeHealingHooksConfig,
		"File of the HTTP(S) hooks called at heal_start and heal_end (FAQ: node healing); empty for none. Not upstream.")
	fs.IntVar(&o.MaxConcurrentHeals, "max-concurrent-heals", o.MaxConcurrentHeals, "Most node heals in flight at once. Not upstream.")
	fs.DurationVar(&o.NodeHealingCooldown, "node-healing-cooldown", o.NodeHealingCooldown,
		"A node healed, or whose heal failed, is not healed again before this has passed. Not upstream.")
	fs.Float64Var(&o.NodeHealingMaxUnhealthyPercent, "node-healing-max-unhealthy-percent", o.NodeHealingMaxUnhealthyPercent,
		"When more than this share of a node group's (or the cluster's) nodes need healing at once, none is healed: an outage, not a node fault. Not upstream.")
	fs.BoolVar(&o.NodeHealingDryRun, "node-healing-dry-run", o.NodeHealingDryRun,
		"Report the nodes that would be healed (HealSkipped events, reason DryRun) without touching them. Not upstream.")
	fs.BoolVar(&o.NodeHealingReplaceFirst, "node-healing-replace-first", o.NodeHealingReplaceFirst,
		"Ask for the replacement before removing the node when its group is below its max size, so capacity never dips. Not upstream.")
	fs.DurationVar(&o.DisruptionSettleTime, "disruption-settle-time", o.DisruptionSettleTime,
		"Nodes younger than this are never disrupted for a voluntary reason (consolidation, drift, expiry); healing keeps its own rules. Not upstream.")
}
