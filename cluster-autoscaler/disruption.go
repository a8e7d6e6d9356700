package main

// registerDisruption adds the flags of the disruption reasons besides
// healing (not upstream; all off by default).
func (c *commandLine) registerDisruption() {
	d, fs := &c.opts.Disruption, c.fs
	fs.StringArrayVar(&d.Budgets, "disruption-budget", d.Budgets,
		"How many nodes of a node group may be disrupted at once, per reason and optionally in a cron window: "+
			"'nodes=<n or n%>[;reasons=<r,...>][;node-groups=<regexp>][;schedule=<cron>;duration=<d>]'; repeatable "+
			"(the smallest active one holds). Without one, voluntary reasons may take 10% of a group; scale-down's (empty, "+
			"underutilized) are held only by a budget naming them (FAQ: disruption). Not upstream.")
	fs.BoolVar(&d.DriftEnabled, "drift-enabled", d.DriftEnabled,
		"Replace nodes whose node group's template changed since they were made (launch template or its version, "+
			"instance type, kwok template), replacement first, within the disruption budgets. Not upstream.")
	fs.DurationVar(&d.MaxNodeLifetime, "max-node-lifetime", d.MaxNodeLifetime,
		"Replace nodes older than this, replacement first, within the disruption budgets; 0 for never. Not upstream.")
	fs.BoolVar(&d.ConsolidationEnabled, "consolidation-enabled", d.ConsolidationEnabled,
		"Remove nodes whose pods fit on the other nodes, or replace nodes by cheaper ones, whatever their utilisation, "+
			"moving pods one at a time as their PodDisruptionBudgets allow (FAQ: disruption). Not upstream.")
	fs.Float64Var(&d.ConsolidationMinSavingRatio, "consolidation-min-saving-ratio", d.ConsolidationMinSavingRatio,
		"A replacement by cheaper capacity must save at least this share of the price of the nodes it removes. Not upstream.")
	fs.Float64Var(&d.ConsolidationMinSavingPerHour, "consolidation-min-saving-per-hour", d.ConsolidationMinSavingPerHour,
		"A replacement by cheaper capacity must save at least this much per hour, in the provider's price unit. Not upstream.")
	fs.IntVar(&d.ConsolidationMaxNodesPerReplacement, "consolidation-max-nodes-per-replacement", d.ConsolidationMaxNodesPerReplacement,
		"The most nodes one new node may replace. Not upstream.")
	fs.IntVar(&d.ConsolidationMaxReplacementsPerLoop, "consolidation-max-replacements-per-loop", d.ConsolidationMaxReplacementsPerLoop,
		"The most replacements by cheaper capacity one loop proposes. Not upstream.")
	fs.IntVar(&d.ConsolidationMaxSimulationsPerLoop, "consolidation-max-simulations-per-loop", d.ConsolidationMaxSimulationsPerLoop,
		"The most node removals the consolidation planner simulates in one loop; the other nodes wait for a later loop. Not upstream.")
	fs.DurationVar(&d.ConsolidationSimulationTimeout, "consolidation-simulation-timeout", d.ConsolidationSimulationTimeout,
		"The longest the consolidation planner works in one loop; 0 for no limit. Not upstream.")
}
