package builder

import (
	"context"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
)

// scaleDownLedger puts scale-down's removals on the disruption engine: the
// delete-only case of its reasons (disruption/deleteonly.go). Scale-down's
// unready nodes go as underutilized (scale-down's own metrics and events
// keep "unready").
type scaleDownLedger struct{ engine *disruption.Engine }

var _ scaledown.Ledger = scaleDownLedger{}

func (l scaleDownLedger) Admit(ctx context.Context, now time.Time, rs []scaledown.LedgerRemoval, atomic bool) map[string]string {
	out := make([]disruption.Removal, len(rs))
	for i, r := range rs {
		reason := disruption.Underutilized
		if r.Empty {
			reason = disruption.Empty
		}
		out[i] = disruption.Removal{Node: r.Node, Group: r.Group, ProviderID: r.ProviderID, Reason: reason, Why: r.Reason}
	}
	return l.engine.AdmitRemovals(ctx, now, out, atomic)
}

func (l scaleDownLedger) Phase(node, phase string, now time.Time) {
	switch phase {
	case scaledown.PhaseDraining:
		l.engine.RemovalPhase(node, disruption.PhaseDraining, now)
	case scaledown.PhaseDeleting:
		l.engine.RemovalPhase(node, disruption.PhaseDeleting, now)
	}
}

func (l scaleDownLedger) Ended(node, outcome string) {
	action := disruption.ActionFailed
	switch outcome {
	case scaledown.OutcomeDeleted:
		action = disruption.ActionCompleted
	case scaledown.OutcomeCancelled:
		action = disruption.ActionCancelled
	}
	l.engine.RemovalEnded(node, action)
}
