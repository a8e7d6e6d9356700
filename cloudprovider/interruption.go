package cloudprovider

import (
	"context"
	"time"
)

// InterruptionKind is what a notice says is coming to an instance.
type InterruptionKind string

// The kinds of notices.
const (
	// SpotInterruption: the cloud takes a Spot instance back shortly (AWS:
	// two minutes).
	SpotInterruption InterruptionKind = "spot_interruption"
	// Rebalance: the instance is at higher risk of interruption soon.
	Rebalance InterruptionKind = "rebalance"
	// StateChange: the instance is stopping or terminating.
	StateChange InterruptionKind = "state_change"
	// ScheduledChange: the cloud scheduled maintenance or retirement of the
	// instance.
	ScheduledChange InterruptionKind = "scheduled_change"
)

// InterruptionNotice says that an instance of a managed node group will
// go (or is going) for a reason the cloud decided.
type InterruptionNotice struct {
	// ID names the notice for AckInterruptions; opaque.
	ID   string
	Kind InterruptionKind
	// Instance is the instance's Id exactly as its group lists it in
	// Nodes (a provider ID), Group the group's Id.
	Instance string
	Group    string
	// InstanceType and Zone are what was interrupted, when known.
	InstanceType string
	Zone         string
	// Time is when the cloud sent the notice; Deadline when the instance
	// goes (zero when the notice does not say).
	Time     time.Time
	Deadline time.Time
	// Detail says what the notice said, for events and logs.
	Detail string
}

// DroppedNotice is a message the provider received and deleted without
// handing it on: Kind is the notice's kind when it could tell, else
// "unknown" or "malformed"; Action says why ("foreign": no instance of a
// managed group; "ignored": a kind or state not acted on; "malformed").
type DroppedNotice struct {
	Kind   string
	Action string
	Detail string
}

// InterruptionSource is implemented by a provider that learns ahead of
// time that instances will go (a cloud's notices); the builder wires it to
// the disruption engine when the provider's flags turn it on.
type InterruptionSource interface {
	// PollInterruptions reads the notices that arrived since the last
	// call (bounded: a few messages, a short wait) and returns every notice
	// not acknowledged yet, and the messages dropped by this call. Notices
	// of messages that could not be read stay pending; err reports a read
	// that failed.
	PollInterruptions(ctx context.Context) (pending []InterruptionNotice, dropped []DroppedNotice, err error)
	// AckInterruptions acknowledges notices once acted on (their node is
	// being disrupted, or is gone): the provider forgets them and deletes
	// their messages.
	AckInterruptions(ctx context.Context, ids []string) error
}
