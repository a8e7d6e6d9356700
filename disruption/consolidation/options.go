package consolidation

import (
	"fmt"
	"time"
)

// Options are the consolidation planner's settings; the flags named in each
// field's comment are the ones proposed for the builder to map.
type Options struct {
	// SettleTime (--consolidation-settle-time, default 5m): nodes younger
	// than this are not candidates (a node just added is let take the
	// pods it was made for).
	SettleTime time.Duration
	// MinSavingRatio (--consolidation-min-saving-ratio, default 0.1) and
	// MinSavingPerHour (--consolidation-min-saving-per-hour, default 0):
	// a replacement is proposed only when it saves at least both this
	// share of the price of the nodes it removes and this amount per
	// hour. Delete-only candidates always save and need neither.
	MinSavingRatio   float64
	MinSavingPerHour float64
	// MaxNodesPerReplacement (--consolidation-max-nodes-per-replacement,
	// default 10) caps k in "k nodes replaced by one".
	MaxNodesPerReplacement int
	// MaxReplacements (--consolidation-max-replacements-per-loop, default
	// 10) caps the replacement candidates of one plan.
	MaxReplacements int
	// DeleteSetSize (default 1) groups the delete-only removals, in the
	// order found, into candidates of up to this many nodes. With 1 each
	// node is its own candidate, which the engine's budgets can take one
	// by one (each fits without the others).
	DeleteSetSize int
	// MaxSimulations (--consolidation-max-simulations-per-loop, default
	// 1000) and Timeout (--consolidation-simulation-timeout, default 5s)
	// bound one plan's work: node removals simulated, and time. Nodes not
	// reached are left for a later loop. The node budget keeps the plan
	// deterministic; the time budget is a safety net (0: none).
	MaxSimulations int
	Timeout        time.Duration
	// PDBBlockedPodWeight (default 10): a pod that a PodDisruptionBudget
	// allowing no disruption now covers counts as this many pods to move
	// when the candidates are ordered.
	PDBBlockedPodWeight float64
}

// DefaultOptions returns the defaults listed on Options.
func DefaultOptions() Options {
	return Options{
		SettleTime:             5 * time.Minute,
		MinSavingRatio:         0.1,
		MaxNodesPerReplacement: 10,
		MaxReplacements:        10,
		DeleteSetSize:          1,
		MaxSimulations:         1000,
		Timeout:                5 * time.Second,
		PDBBlockedPodWeight:    10,
	}
}

// Validate reports the first setting out of range.
func (o Options) Validate() error {
	switch {
	case o.SettleTime < 0:
		return fmt.Errorf("consolidation settle time %v is negative", o.SettleTime)
	case o.MinSavingRatio < 0 || o.MinSavingRatio > 1:
		return fmt.Errorf("consolidation min saving ratio %v is not within [0, 1]", o.MinSavingRatio)
	case o.MinSavingPerHour < 0:
		return fmt.Errorf("consolidation min saving per hour %v is negative", o.MinSavingPerHour)
	case o.MaxNodesPerReplacement < 1:
		return fmt.Errorf("consolidation max nodes per replacement %d is below 1", o.MaxNodesPerReplacement)
	case o.MaxReplacements < 0:
		return fmt.Errorf("consolidation max replacements %d is negative", o.MaxReplacements)
	case o.DeleteSetSize < 1:
		return fmt.Errorf("consolidation delete set size %d is below 1", o.DeleteSetSize)
	case o.MaxSimulations < 1:
		return fmt.Errorf("consolidation max simulations %d is below 1", o.MaxSimulations)
	case o.Timeout < 0:
		return fmt.Errorf("consolidation simulation timeout %v is negative", o.Timeout)
	case o.PDBBlockedPodWeight < 0:
		return fmt.Errorf("consolidation PDB-blocked pod weight %v is negative", o.PDBBlockedPodWeight)
	}
	return nil
}
