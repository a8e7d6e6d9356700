package builder

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// NewReplacementHealth answers the disruption engine's questions about the
// node groups it asks for replacements (disruption.Options.ReplacementHealth)
// from the cluster state registry, as its last Update saw them: a group is
// backed off while the registry backs it off (a failed scale-up, an
// instance whose creation failed, nodes that never registered), and it
// failed since a time when a back-off, or a failed instance, was first
// seen after that time. The registry keeps no history, so the answers
// remember when each back-off (by its end) and each failed instance was
// first seen, at the loop times the engine asks with; the engine asks
// BackedOff just before every ask for capacity, so what was there before
// the ask is seen then. A target size that fell is never a failure.
func NewReplacementHealth(state *clusterstate.Registry) disruption.ReplacementHealth {
	return &replacementHealth{state: state, backoffs: map[string]sighting{}, failed: map[string]map[string]time.Time{}}
}

type replacementHealth struct {
	state *clusterstate.Registry

	mu sync.Mutex
	// backoffs are, per group, the back-off last seen (its end) and when
	// it was first seen.
	backoffs map[string]sighting
	// failed are, per group, its failed instances and when each was first
	// seen (only those the registry still lists).
	failed map[string]map[string]time.Time
}

type sighting struct {
	until, seen time.Time
}

// BackedOff implements disruption.ReplacementHealth.
func (h *replacementHealth) BackedOff(group string, now time.Time) (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	gs := h.observe(group, now)
	if gs == nil || !gs.BackedOff {
		return false, ""
	}
	return true, backoffWhy(gs)
}

// FailedSince implements disruption.ReplacementHealth.
func (h *replacementHealth) FailedSince(group string, since, now time.Time) (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	gs := h.observe(group, now)
	if gs == nil {
		return false, ""
	}
	if gs.BackedOff && h.backoffs[group].seen.After(since) {
		return true, backoffWhy(gs)
	}
	for _, in := range gs.FailedInstances {
		if !h.failed[group][in.Id].After(since) {
			continue
		}
		why := "instance " + in.Id + " failed to be created"
		if e := in.Status.ErrorInfo; e != nil {
			why += fmt.Sprintf(": %s: %s", e.ErrorCode, e.ErrorMessage)
		}
		return true, why
	}
	return false, ""
}

// observe notes when the group's back-off and failed instances, as the
// registry has them, were first seen; it returns the group's state (nil
// when the registry does not know it). h.mu is held.
func (h *replacementHealth) observe(group string, now time.Time) *clusterstate.GroupState {
	gs := h.state.Group(group)
	if gs == nil {
		delete(h.backoffs, group)
		delete(h.failed, group)
		return nil
	}
	if !gs.BackedOff {
		delete(h.backoffs, group)
	} else if b, ok := h.backoffs[group]; !ok || !b.until.Equal(gs.BackoffUntil) {
		// A new back-off (a failure during one does not move its end).
		h.backoffs[group] = sighting{until: gs.BackoffUntil, seen: now}
	}
	seen := map[string]time.Time{}
	for _, in := range gs.FailedInstances {
		at, ok := h.failed[group][in.Id]
		if !ok {
			at = now
		}
		seen[in.Id] = at
	}
	h.failed[group] = seen
	return gs
}

func backoffWhy(gs *clusterstate.GroupState) string {
	why := fmt.Sprintf("backed off until %s", gs.BackoffUntil.UTC().Format(time.RFC3339))
	if r := gs.BackoffReason; r.ErrorCode != "" || r.ErrorMessage != "" {
		why += fmt.Sprintf(": %s: %s", r.ErrorCode, r.ErrorMessage)
	}
	return why
}
