package disruption

import (
	"context"
	"fmt"

	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// Reason is why a node is disrupted; it labels metrics and events and keys
// the budgets.
type Reason string

// The reasons, as metrics and budgets name them.
const (
	Unhealthy      Reason = "unhealthy"
	Empty          Reason = "empty"
	Underutilized  Reason = "underutilized"
	Consolidatable Reason = "consolidatable"
	Drifted        Reason = "drifted"
	Expired        Reason = "expired"
	Interrupted    Reason = "interrupted"
	// MaxRunDuration: a node an all-or-nothing ProvisioningRequest's
	// scale-up made, once the request's maxRunDurationSeconds passed.
	MaxRunDuration Reason = "maxrunduration"
	// ReservationEnding: a node on reserved capacity that ends at a fixed
	// time (an EC2 Capacity Block), shortly before the end. Not voluntary:
	// the capacity goes whatever is decided.
	ReservationEnding Reason = "reservationending"
)

// Reasons lists every reason, in the order the engine serves them when
// several sources propose the same node (the first wins).
var Reasons = []Reason{Interrupted, Unhealthy, ReservationEnding, MaxRunDuration, Expired, Drifted, Consolidatable, Empty, Underutilized}

// ParseReason returns the reason named s.
func ParseReason(s string) (Reason, error) {
	for _, r := range Reasons {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown disruption reason %q (one of %v)", s, Reasons)
}

// Replacement is new capacity asked for before the nodes it replaces are
// drained: Count nodes of node group Group.
type Replacement struct {
	Group string
	Count int
}

// Candidate is one disruption a source proposes: the Nodes (node names, one
// unless a consolidation removes a set together) go for Reason, after the
// Replacement (none: delete only) is Ready.
type Candidate struct {
	Reason Reason
	Nodes  []string
	// Replacement is empty when the nodes' pods fit on the nodes that stay.
	Replacement []Replacement
	// SavingPerHour is the estimated cost per hour saved (consolidation;
	// 0 when unknown or not the point).
	SavingPerHour float64
	// Message says why, for events, logs and the explainer.
	Message string
}

// Source proposes candidates from one loop's facts; it is a pure decision
// (no API server, no cloud provider writes). The engine asks every source
// once per loop, drops what protections and budgets hold back, and starts
// the rest; a candidate a source stops proposing before its drain began is
// cancelled (the reason no longer holds).
type Source interface {
	Reason() Reason
	Propose(ctx context.Context, loop *processors.Loop) []Candidate
}
