package clusterstate

import (
	"sync"
	"time"
)

// Backoff keeps node groups whose scale-ups failed out of scale-up for a
// while: the first failure backs a group off for initial, each failure after
// that back-off expired doubles it up to max, and a group without failures
// for reset starts again from initial. Failures during a back-off do not
// extend it. A hold (SetHolds) backs a group off until a fixed time for a
// reason of its own, without a failure: it neither starts nor lengthens the
// exponential back-off. Time is passed in; Backoff never reads a clock.
type Backoff struct {
	initial, max, reset time.Duration

	mu     sync.Mutex
	groups map[string]*backoffEntry
	// holds are the fixed-until holds, by group.
	holds map[string]Hold
}

// Hold backs a group off until a fixed time for a reason.
type Hold struct {
	Reason BackoffReason
	Until  time.Time
}

type backoffEntry struct {
	duration    time.Duration
	until       time.Time
	lastFailure time.Time
	reason      BackoffReason
}

// BackoffReason says why a group is backed off.
type BackoffReason struct {
	ErrorCode    string
	ErrorMessage string
}

// NewBackoff builds a Backoff from --initial-node-group-backoff-duration,
// --max-node-group-backoff-duration and --node-group-backoff-reset-timeout.
func NewBackoff(initial, max, reset time.Duration) *Backoff {
	return &Backoff{initial: initial, max: max, reset: reset, groups: map[string]*backoffEntry{}, holds: map[string]Hold{}}
}

// SetHolds replaces every hold with holds (by group); a hold whose Until
// is not after now is dropped.
func (b *Backoff) SetHolds(holds map[string]Hold, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holds = make(map[string]Hold, len(holds))
	for g, h := range holds {
		if now.Before(h.Until) {
			b.holds[g] = h
		}
	}
}

// current is the back-off of group at now: the failure back-off or the
// hold, whichever ends later when both are on. b.mu is held.
func (b *Backoff) current(group string, now time.Time) (bool, BackoffReason, time.Time) {
	var on bool
	var reason BackoffReason
	var until time.Time
	if e, ok := b.groups[group]; ok && now.Before(e.until) {
		on, reason, until = true, e.reason, e.until
	}
	if h, ok := b.holds[group]; ok && now.Before(h.Until) && h.Until.After(until) {
		on, reason, until = true, h.Reason, h.Until
	}
	return on, reason, until
}

// RegisterFailure records a failed scale-up of group at now and returns
// until when the group is backed off.
func (b *Backoff) RegisterFailure(group string, reason BackoffReason, now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.groups[group]
	switch {
	case !ok || now.Sub(e.lastFailure) > b.reset:
		e = &backoffEntry{duration: b.initial}
		b.groups[group] = e
	case now.Before(e.until):
		e.lastFailure = now
		return e.until // already backed off: not extended
	default:
		e.duration = min(2*e.duration, b.max)
	}
	e.until = now.Add(e.duration)
	e.lastFailure = now
	e.reason = reason
	return e.until
}

// BackedOff reports whether group is backed off at now (by a failure or
// a hold), and why.
func (b *Backoff) BackedOff(group string, now time.Time) (bool, BackoffReason) {
	b.mu.Lock()
	defer b.mu.Unlock()
	on, reason, _ := b.current(group, now)
	return on, reason
}

// Until is when group's back-off ends, zero when it is not backed off at now.
func (b *Backoff) Until(group string, now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _, until := b.current(group, now)
	return until
}
