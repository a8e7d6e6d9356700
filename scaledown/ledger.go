package scaledown

import (
	"context"
	"time"
)

// Ledger is the disruption engine's record of scale-down's removals (the
// delete-only case of the engine's reasons): it may hold a removal back
// (a node the engine is replacing, a disruption budget an operator wrote
// for empty or underutilized nodes), and it is told each removal's phase and
// end. Without one (the engine off) removals start on scale-down's own
// limits alone, as upstream's.
type Ledger interface {
	// Admit is asked before a removal job starts, with its nodes (all of
	// them or none when atomic); it returns those it holds back, with why.
	// The others are on record until Ended.
	Admit(ctx context.Context, now time.Time, rs []LedgerRemoval, atomic bool) map[string]string
	// Phase records that the removal of node reached phase (PhaseDraining,
	// PhaseDeleting).
	Phase(node, phase string, now time.Time)
	// Ended records how the removal of node ended (Outcome*); a removal
	// cut short by the end of its context (lease lost, shutdown) is not
	// ended: it stays on record for the next leader.
	Ended(node, outcome string)
}

// LedgerRemoval is one node of a removal job, as the Ledger is told.
type LedgerRemoval struct {
	Node, Group, ProviderID string
	// Reason is scale-down's (ReasonEmpty, ReasonUnderutilized, ReasonUnready).
	Reason string
	Empty  bool
}

// The phases and outcomes a Ledger is told.
const (
	PhaseDraining    = "Draining" // tainted; the pods, if any, being evicted
	PhaseDeleting    = "Deleting" // the provider asked to delete the node
	OutcomeDeleted   = "deleted"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// WithLedger gives the actuator the disruption engine's ledger.
func WithLedger(l Ledger) Option { return func(s *ScaleDown) { s.actuator.ledger = l } }

// admit asks the ledger (if any) about job j: it returns the job with the
// nodes the ledger admitted, nil when none may go.
func (a *Actuator) admit(ctx context.Context, j *job) *job {
	if a.ledger == nil {
		return j
	}
	rs := make([]LedgerRemoval, len(j.cs))
	for i, c := range j.cs {
		rs[i] = LedgerRemoval{Node: c.Node.Name, Group: c.Group.Id(), ProviderID: c.Node.Spec.ProviderID,
			Reason: reasonOf(c), Empty: c.Empty()}
	}
	held := a.ledger.Admit(ctx, a.clock.Now(), rs, j.atomic)
	if len(held) == 0 {
		return j
	}
	if j.atomic {
		return nil
	}
	kept := &job{}
	for _, c := range j.cs {
		if held[c.Node.Name] == "" {
			kept.cs = append(kept.cs, c)
		}
	}
	if len(kept.cs) == 0 {
		return nil
	}
	return kept
}

func (a *Actuator) phase(cs []*Candidate, phase string) {
	if a.ledger == nil {
		return
	}
	for _, c := range cs {
		a.ledger.Phase(c.Node.Name, phase, a.clock.Now())
	}
}

// ended tells the ledger, once, how the removal of c ended.
func (a *Actuator) ended(c *Candidate, outcome string) {
	if a.ledger == nil {
		return
	}
	a.toldMu.Lock()
	told := a.told[c.Node.Name]
	a.told[c.Node.Name] = true
	a.toldMu.Unlock()
	if !told {
		a.ledger.Ended(c.Node.Name, outcome)
	}
}

// forget clears, once c's job is over, that its end was told.
func (a *Actuator) forget(c *Candidate) {
	a.toldMu.Lock()
	defer a.toldMu.Unlock()
	delete(a.told, c.Node.Name)
}
