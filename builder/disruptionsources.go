package builder

import (
	"fmt"

	"k8s.io/client-go/informers"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/budget"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/consolidation"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/lifecycle"
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
		out = append(out, lifecycle.NewExpiry(provider, o.Disruption.MaxNodeLifetime))
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
