package processor

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

// ReasonMaxRunDurationExceeded is CapacityRevoked's reason once a
// request's maxRunDurationSeconds has passed since it was provisioned.
const ReasonMaxRunDurationExceeded = "MaxRunDurationExceeded"

// Release is a node of an all-or-nothing request with a run limit
// (maxRunDurationSeconds): the node its scale-up made, released through the
// disruption engine once the limit passed.
type Release struct {
	// Namespace and Name are the request's; UID tells it from a request
	// recreated under the same name.
	Namespace, Name string
	UID             types.UID
	// Provisioned is when the request became Provisioned: the node existed
	// by then (a node of the same name created later is another node).
	Provisioned time.Time
	// RevokeAt is Provisioned plus the run limit; GraceEnd is RevokeAt
	// plus --provisioning-request-max-run-grace: from then on the node is
	// drained even with the request's pods still on it.
	RevokeAt, GraceEnd time.Time
	// Revoked: the limit passed and the request's capacity is revoked (or
	// was revoked before, for another reason).
	Revoked bool
}

// releaseRetention is how long a released node of a request that is gone
// stays on the list when the loop never tells which nodes exist.
const releaseRetention = 24 * time.Hour

// RunReleases are the nodes of requests with a run limit, as the last loop
// left them, by node name: those whose limit is still ahead (Revoked
// false, for the explainer) and those to release. A request deleted once
// revoked (Kueue deletes the requests of the workload it evicts) leaves
// its nodes on the list until they are gone. Safe from any goroutine.
func (p *Processor) RunReleases() map[string]Release {
	p.holdsMu.Lock()
	defer p.holdsMu.Unlock()
	return p.releases
}

// runLimit is r's run limit: ok is false unless r is Provisioned, not
// failed, and sets a valid maxRunDurationSeconds.
func (l *Loop) runLimit(r *request) (rel Release, limit time.Duration, ok bool) {
	c := r.status.Conditions
	prov := provreq.FindCondition(c, provreq.ConditionProvisioned)
	if prov == nil || prov.Status != "True" || provreq.IsConditionTrue(c, provreq.ConditionFailed) {
		return Release{}, 0, false
	}
	d, set, err := provreq.ParseMaxRunDurationSeconds(r.pr.Spec.Parameters)
	if !set || err != nil {
		return Release{}, 0, false
	}
	rel = Release{Namespace: r.pr.Namespace, Name: r.pr.Name, UID: r.pr.UID, Provisioned: prov.LastTransitionTime.Time}
	rel.RevokeAt = rel.Provisioned.Add(d)
	rel.GraceEnd = rel.RevokeAt.Add(l.p.opts.MaxRunGrace)
	rel.Revoked = provreq.IsConditionTrue(c, provreq.ConditionCapacityRevoked) && !l.now.Before(rel.RevokeAt)
	return rel, d, true
}

// enforceRunLimit revokes r's capacity once its run limit has passed.
func (l *Loop) enforceRunLimit(r *request) {
	rel, d, ok := l.runLimit(r)
	if !ok || l.now.Before(rel.RevokeAt) || provreq.IsConditionTrue(r.status.Conditions, provreq.ConditionCapacityRevoked) {
		return
	}
	nodes := "It made no nodes of its own."
	if n := len(r.state.nodes); n > 0 {
		nodes = fmt.Sprintf("Its %d nodes (%s) are released once its pods are gone from them, or from %s on.", n,
			strings.Join(sortedNames(r.state.nodes), ", "), rel.GraceEnd.UTC().Format(time.RFC3339))
	}
	l.set(r, provreq.ConditionCapacityRevoked, true, ReasonMaxRunDurationExceeded, fmt.Sprintf(
		"maxRunDurationSeconds=%d passed at %s (provisioned at %s): the capacity is revoked. %s",
		int64(d/time.Second), rel.RevokeAt.UTC().Format(time.RFC3339), rel.Provisioned.UTC().Format(time.RFC3339), nodes))
}

// runLimitNote is what a Provisioned=True message adds for a request with
// a run limit: when its capacity is revoked ("" without a limit).
func (l *Loop) runLimitNote(r *request) string {
	d, set, err := provreq.ParseMaxRunDurationSeconds(r.pr.Spec.Parameters)
	if !set || err != nil {
		return ""
	}
	// The condition's time, as the API server keeps it (whole seconds).
	at := l.now.Truncate(time.Second).Add(d)
	return fmt.Sprintf(" The capacity is revoked at %s (maxRunDurationSeconds=%d).", at.UTC().Format(time.RFC3339),
		int64(d/time.Second))
}

// publishRunLimits sets RunReleases from the loop's requests at its end,
// keeping the revoked ones of requests deleted since until their nodes are
// gone; a loop that could not list the requests or read the records
// leaves them as they were.
func (l *Loop) publishRunLimits() {
	if l.blind || l.unrestored {
		return
	}
	next := map[string]Release{}
	listed := map[types.UID]bool{}
	for _, r := range l.requests {
		listed[r.pr.UID] = true
		rel, _, ok := l.runLimit(r)
		if !ok {
			continue
		}
		for n := range r.state.nodes {
			next[n] = rel
		}
	}
	l.p.holdsMu.Lock()
	defer l.p.holdsMu.Unlock()
	for n, rel := range l.p.releases {
		switch _, taken := next[n]; {
		case taken || listed[rel.UID] || !rel.Revoked:
		case l.present != nil && !l.present[n]:
		case l.now.Sub(rel.GraceEnd) > releaseRetention:
		default:
			next[n] = rel
		}
	}
	l.p.releases = next
}

// runLimited: r's nodes are kept on record while its run limit may still
// release them.
func (l *Loop) runLimited(r *request) bool {
	_, _, ok := l.runLimit(r)
	return ok
}
