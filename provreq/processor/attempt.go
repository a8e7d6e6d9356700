package processor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// Instances tells the processor how the node groups' instances are doing.
type Instances interface {
	// NodeGroup returns the group's target size and its instances as the
	// provider lists them, each with its Node once registered; ok is false
	// when the group does not exist.
	NodeGroup(id string) (view GroupView, ok bool)
}

// GroupView is one node group as the loop's cluster state sees it.
type GroupView struct {
	Target    int
	Instances []InstanceState
}

// InstanceState is one listed instance.
type InstanceState struct {
	Id string
	// Node is its Node once it registered.
	Node *apiv1.Node
	// Error is its creation error, if it failed.
	Error string
	// Deleting is true while the provider deletes it.
	Deleting bool
}

// InstanceViews is a function form of Instances.
type InstanceViews func(id string) (GroupView, bool)

// NodeGroup implements Instances.
func (f InstanceViews) NodeGroup(id string) (GroupView, bool) { return f(id) }

// RollbackFunc undoes the shares of failed or abandoned all-or-nothing
// attempts (scaleup.Orchestrator.Rollback) and returns what it could not
// undo yet, by node group.
type RollbackFunc func(ctx context.Context, undo map[string]scaleup.Undo, why string) (map[string]scaleup.Undo, error)

// attempt is an atomic scale-up in flight: one share per node group.
type attempt struct {
	groups  map[string]*share
	started time.Time
	// unchecked: restored from a record, its node groups not checked yet.
	unchecked bool
}

func newAttempt(res scaleup.AtomicResult, now time.Time) *attempt {
	at := &attempt{groups: map[string]*share{}, started: now}
	for _, inc := range res.Increases {
		at.groups[inc.NodeGroup] = newShare(inc.To-inc.From, res.Before[inc.NodeGroup], res.Instances[inc.NodeGroup])
	}
	return at
}

// undo is a rollback that is not finished: what is left of an attempt's
// shares after a rollback call, retried each loop.
type undo struct {
	why    string
	since  time.Time
	groups map[string]*share
	// lastChance: asked-for instances the target no longer covered get one
	// more loop to be listed (they may have been listed meanwhile); after
	// that they are taken as cancelled, so that a later scale-up's instances
	// are never mistaken for them.
	lastChance bool
	// cancelOnly: the request was deleted. Only the instances the cloud
	// has not listed yet are cancelled (the target decreased by their
	// number), and only in a loop with no ordinary pending pod, which might
	// use them; the instances listed are left to scale-down and cleanup.
	cancelOnly bool
	// tried: the provider was asked at least once already.
	tried bool
	// owner and request are the request whose attempt it undoes (its UID
	// and namespace/name): its record holds the undo until it is done.
	owner   types.UID
	request string
	// unchecked: restored from a record, its node groups not checked yet.
	unchecked bool
	// failedAt: when the rollback was given up (a failed one, kept on
	// record only).
	failedAt time.Time
}

// abandon ends the request's attempt, if any: everything it made is rolled
// back in this loop's Run (or the next loop's, if this one has none).
func (l *Loop) abandon(r *request, why string) {
	if at := r.state.attempt; at != nil {
		l.p.undos = append(l.p.undos, &undo{why: fmt.Sprintf("ProvisioningRequest %s/%s: %s", r.pr.Namespace, r.pr.Name, why),
			since: l.now, groups: at.groups, owner: r.pr.UID, request: r.state.name, unchecked: at.unchecked})
		r.state.attempt = nil
	}
}

// claimAll attributes newly listed instances to the shares of the
// rollbacks (first: they are older) and of the attempts, and returns, by
// node group, how many of the instances the attempts still wait for the
// group's target size does not cover.
func (l *Loop) claimAll(instances Instances) map[string]int {
	taken := map[string]bool{}
	var all []map[string]*share
	for _, u := range l.p.undos {
		all = append(all, u.groups)
	}
	var attempts []map[string]*share
	for _, r := range l.requests {
		if r.state.attempt != nil {
			attempts = append(attempts, r.state.attempt.groups)
		}
	}
	all = append(all, attempts...)
	for _, ids := range l.p.attributed {
		for id := range ids {
			taken[id] = true
		}
	}
	for _, groups := range all {
		for _, sh := range groups {
			for _, id := range sh.listed() {
				taken[id] = true
			}
		}
	}
	for _, u := range l.p.failed {
		for _, sh := range u.groups {
			for _, id := range sh.listed() {
				taken[id] = true
			}
		}
	}
	views := map[string]GroupView{}
	viewOf := func(g string) (GroupView, bool) {
		view, ok := views[g]
		if !ok {
			if view, ok = instances.NodeGroup(g); ok {
				views[g] = view
			}
		}
		return view, ok
	}
	for _, groups := range all {
		for g, sh := range groups {
			if view, ok := viewOf(g); ok {
				sh.claim(view, taken)
			}
		}
	}
	l.remember(all, viewOf)
	waiting := map[string]int{}
	for _, groups := range attempts {
		for g, sh := range groups {
			waiting[g] += sh.unlisted()
		}
	}
	deficit := map[string]int{}
	for g, n := range waiting {
		view, ok := views[g]
		if !ok || n == 0 {
			continue
		}
		listed := 0
		for _, in := range view.Instances {
			if in.Error == "" && !in.Deleting {
				listed++
			}
		}
		if d := n - (view.Target - listed); d > 0 {
			deficit[g] = d
		}
	}
	return deficit
}

// remember adds the shares' claims to the attributed instances and forgets
// those their group no longer lists (or whose group is gone).
func (l *Loop) remember(all []map[string]*share, viewOf func(string) (GroupView, bool)) {
	attributed := l.p.attributed
	for _, groups := range all {
		for g, sh := range groups {
			for _, id := range sh.listed() {
				if attributed[g] == nil {
					attributed[g] = map[string]bool{}
				}
				attributed[g][id] = true
			}
		}
	}
	for g, ids := range attributed {
		view, ok := viewOf(g)
		listed := make(map[string]bool, len(view.Instances))
		for _, in := range view.Instances {
			listed[in.Id] = true
		}
		for id := range ids {
			if !ok || !listed[id] {
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(attributed, g)
		}
	}
}

// watch follows an atomic attempt: once every instance asked for is listed
// and registered (and Ready when asked) the request is Provisioned; a
// failed, vanished or late instance, a gone node group or a target size
// that no longer covers the instances still to come ends the attempt, which
// is then rolled back, and backs the request off.
func (l *Loop) watch(ctx context.Context, r *request, capacity Capacity, instances Instances, deficit map[string]int) {
	at := r.state.attempt
	waitReady, _ := provreq.ParseBoolParameter(r.pr.Spec.Parameters, ParamWaitForReadyNodes) // checked in lifecycle
	total, ready, unlisted := 0, 0, 0
	nodes := map[string]bool{}
	var problem string
	gone := false
	groups := make([]string, 0, len(at.groups))
	for g := range at.groups {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	late := l.now.Sub(at.started) > l.p.opts.MaxNodeProvisionTime
	for _, g := range groups {
		sh := at.groups[g]
		total += sh.asked
		unlisted += sh.unlisted()
		view, ok := instances.NodeGroup(g)
		if !ok {
			problem, gone = fmt.Sprintf("node group %s is gone", g), true
			break
		}
		byID := make(map[string]InstanceState, len(view.Instances))
		for _, in := range view.Instances {
			byID[in.Id] = in
		}
		for _, id := range sh.listed() {
			st, ok := byID[id]
			switch {
			case !ok && late:
				// Past the provision time an instance that never
				// registered is deleted by the cleanup: the attempt
				// timed out, which the check below reports.
			case !ok:
				problem = fmt.Sprintf("instance %s of %s disappeared", id, g)
			case st.Error != "":
				problem = fmt.Sprintf("instance %s of %s failed: %s", id, g, st.Error)
			case st.Node != nil && (!waitReady || nodeReady(st.Node)):
				ready++
				nodes[st.Node.Name] = true
			}
			if problem != "" {
				break
			}
		}
		if problem == "" && sh.unlisted() > 0 && deficit[g] > 0 {
			problem = fmt.Sprintf("the target size of %s (%d) no longer covers the %d instances it has not listed yet",
				g, view.Target, sh.unlisted())
		}
		if problem != "" {
			break
		}
	}
	if problem == "" && ready < total && late {
		problem = fmt.Sprintf("%d of %d new nodes were not ready within %v (%d never listed by the cloud)",
			total-ready, total, l.p.opts.MaxNodeProvisionTime, unlisted)
	}
	switch {
	case problem != "":
		l.abandon(r, "the attempt failed: "+problem)
		if gone {
			l.fail(r, ReasonNodeGroupsGone, fmt.Sprintf("The node groups of the attempt are gone (%s).", problem))
			return
		}
		if deadline, set, _ := provreq.ValidUntil(r.pr); set && l.now.After(deadline) {
			l.fail(r, provreq.ReasonExpired, fmt.Sprintf("The last attempt failed (%s) and ValidUntilSeconds has passed.", problem))
			return
		}
		retry := l.backOff(r)
		l.set(r, provreq.ConditionProvisioned, false, provreq.ReasonCapacityIsNotFound, fmt.Sprintf(
			"The scale-up was rolled back (new instances deleted, instances not created yet cancelled): %s. Next try at %s.",
			problem, retry.UTC().Format(time.RFC3339)))
	case ready == total:
		r.state.attempt = nil
		r.state.backoff = 0
		r.state.nodes = nodes
		klog.FromContext(ctx).V(2).Info("All-or-nothing attempt provisioned", "provisioningRequest", klog.KObj(r.pr),
			"nodes", sortedNames(nodes))
		what := "registered"
		if waitReady {
			what = "Ready"
		}
		l.set(r, provreq.ConditionProvisioned, true, provreq.ReasonCapacityIsProvisioned, fmt.Sprintf(
			"All %d new nodes are %s; the capacity is reserved for %v.", total, what, l.p.opts.BookingTime))
		if r.pods != nil {
			r.booked = len(r.pods) - len(capacity.Place(ctx, r.sets, false))
		}
	default:
		if r.pods != nil {
			capacity.Place(ctx, r.sets, false) // hold the upcoming nodes for these pods
		}
		l.set(r, provreq.ConditionProvisioned, false, ReasonProvisioningInProgress, fmt.Sprintf(
			"%d of %d new nodes are ready for the request's %d pods; %d not listed by the cloud yet.",
			ready, total, r.total(), unlisted))
	}
}

// finishUndos rolls back what abandoned attempts made, and retries what an
// earlier rollback left, claiming the instances listed since. It sets
// l.rolledBack when it may have removed capacity: on a rollback's first
// call (an answer lost in a timeout may hide a deletion that took effect)
// and on any later call that undid something. A retry that undid nothing
// does not hold the requests back, or a provider that keeps refusing
// deletions would hold them back until the rollback is given up.
func (l *Loop) finishUndos(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var keep []*undo
	for _, u := range l.p.undos {
		if u.cancelOnly {
			if l.cancel(ctx, u) {
				keep = append(keep, u)
			}
			continue
		}
		plan := map[string]scaleup.Undo{}
		for g, sh := range u.groups {
			// Only the instances claimed: adopted ones were never
			// attributed to the attempt by the leader that made it.
			un := scaleup.Undo{Instances: sh.claimed, Unlisted: sh.unlisted(), Request: u.request}
			if u.lastChance {
				un.Unlisted = 0
			}
			if !un.Empty() {
				plan[g] = un
			}
		}
		if len(plan) == 0 {
			continue
		}
		left, err := l.p.rollback(ctx, plan, u.why)
		if err != nil {
			logger.Error(err, "Rolling back an all-or-nothing scale-up", "reason", u.why)
		}
		if !u.tried || undid(plan, left) {
			l.rolledBack = true
		}
		next := &undo{why: u.why, since: u.since, groups: map[string]*share{}, tried: true, owner: u.owner,
			request: u.request}
		for g, rest := range left {
			if rest.Empty() {
				continue
			}
			old := u.groups[g]
			sh := &share{asked: len(rest.Instances) + rest.Unlisted, before: old.before, claimed: rest.Instances,
				restored: old.restored, deleting: true}
			deleted := map[string]bool{}
			for _, id := range rest.Instances {
				deleted[id] = true
			}
			for _, id := range old.claimed {
				if !deleted[id] {
					sh.before[id] = true // deleted: never claimed again
				}
			}
			for _, id := range old.adopted {
				sh.before[id] = true // never the attempt's to delete
			}
			l.keep(ctx, next, g, sh, old.kept, rest.Kept)
			next.groups[g] = sh
			if rest.Unlisted > 0 {
				next.lastChance = true
			}
		}
		switch {
		case len(next.groups) == 0:
			logger.Info("Rolled back an all-or-nothing scale-up", "reason", u.why)
		case l.now.Sub(u.since) > l.p.opts.MaxNodeProvisionTime:
			l.giveUp(ctx, next, err)
		default:
			keep = append(keep, next)
		}
	}
	l.p.undos = keep
	l.forgetFailed()
}

// keep carries over to sh the instances a rollback kept because their
// nodes run other pods (was: those kept before, now: this call's) and
// reports those kept for the first time with a Warning event.
func (l *Loop) keep(ctx context.Context, u *undo, group string, sh *share, was, now map[string]string) {
	for _, id := range sh.claimed {
		why, ok := now[id]
		if !ok {
			continue
		}
		if sh.kept == nil {
			sh.kept = map[string]string{}
		}
		sh.kept[id] = why
		if _, reported := was[id]; reported {
			continue
		}
		msg := fmt.Sprintf("Instance %s of node group %s is not deleted by the rollback of ProvisioningRequest %s's scale-up: %s. "+
			"The rollback is retried while it lasts (up to --max-node-provision-time), and then recorded as failed.",
			id, group, u.request, why)
		klog.FromContext(ctx).Info("Rollback kept an instance whose node runs other pods", "instance", id, "nodeGroup", group,
			"provisioningRequest", u.request, "why", why)
		l.warn(u.owner, ReasonRollbackKeptNode, msg)
	}
}

// giveUp ends a rollback that did not finish in time: it is kept on record
// as failed (nothing more is done for it), with a Warning event.
func (l *Loop) giveUp(ctx context.Context, u *undo, err error) {
	klog.FromContext(ctx).Error(errors.Join(err, errors.New("rollback not finished in time")),
		"Giving up rolling back an all-or-nothing scale-up", "reason", u.why, "left", describeShares(u.groups))
	l.warn(u.owner, ReasonRollbackFailed, fmt.Sprintf(
		"The rollback of ProvisioningRequest %s's scale-up did not finish within --max-node-provision-time and is given up; "+
			"nothing more is deleted for it. Left: %s.", u.request, describeShares(u.groups)))
	u.failedAt = l.now
	l.p.failed = append(l.p.failed, u)
}

// forgetFailed drops the failed rollbacks of requests that are gone and
// those failed longer than failedRollbackRetention ago.
func (l *Loop) forgetFailed() {
	var keep []*undo
	for _, u := range l.p.failed {
		if _, live := l.p.states[u.owner]; live && l.now.Sub(u.failedAt) <= failedRollbackRetention {
			keep = append(keep, u)
		}
	}
	l.p.failed = keep
}

// failedRollbackRetention is how long a failed rollback stays on record.
const failedRollbackRetention = 24 * time.Hour

// Reasons of the Warning events about rollbacks.
const (
	// ReasonRollbackKeptNode: an instance of a rollback is not deleted
	// because its node runs pods other than the request's.
	ReasonRollbackKeptNode = "RollbackKeptBusyNode"
	// ReasonRollbackFailed: a rollback did not finish in time.
	ReasonRollbackFailed = "RollbackFailed"
)

// warn records a Warning event on the records' object and, when it is in
// this loop, on the request whose UID is owner.
func (l *Loop) warn(owner types.UID, reason, msg string) {
	if l.p.recorder == nil {
		return
	}
	if l.p.store != nil {
		if ref := l.p.store.Reference(); ref != nil {
			l.p.recorder.Event(ref, apiv1.EventTypeWarning, reason, msg)
		}
	}
	for _, r := range l.requests {
		if r.pr.UID == owner {
			l.p.recorder.Event(reference(r.pr), apiv1.EventTypeWarning, reason, msg)
		}
	}
}

// cancel decreases the targets of a deleted request's groups by the
// instances not listed yet, and reports whether to try again next loop.
// While ordinary pods are pending it waits: the upcoming nodes may be
// theirs (they were counted for them in this loop's snapshot).
func (l *Loop) cancel(ctx context.Context, u *undo) bool {
	logger := klog.FromContext(ctx)
	late := l.now.Sub(u.since) > l.p.opts.MaxNodeProvisionTime
	plan := map[string]scaleup.Undo{}
	created := 0
	for g, sh := range u.groups {
		created += len(sh.claimed)
		if n := sh.unlisted(); n > 0 {
			plan[g] = scaleup.Undo{Unlisted: n}
		}
	}
	switch {
	case len(plan) == 0:
		logger.Info("Nothing of the deleted request's scale-up is left to cancel; its created instances are left to scale-down",
			"reason", u.why, "created", created)
		return false
	case late:
		logger.Info("Not cancelling the deleted request's instances any more: past the provision time",
			"reason", u.why, "left", describeShares(u.groups))
		return false
	case len(l.pending) > 0:
		logger.V(2).Info("Keeping the deleted request's upcoming instances while pods are pending",
			"reason", u.why, "pending", len(l.pending), "left", describeShares(u.groups))
		return true
	}
	left, err := l.p.rollback(ctx, plan, u.why)
	if err != nil {
		logger.Error(err, "Cancelling the instances of a deleted request's scale-up", "reason", u.why)
	}
	if !u.tried || undid(plan, left) {
		l.rolledBack = true
	}
	u.tried = true
	cancelled := 0
	for g, un := range plan {
		cancelled += un.Unlisted - left[g].Unlisted
		sh := u.groups[g]
		sh.asked -= un.Unlisted - left[g].Unlisted
	}
	logger.Info("Cancelled the instances of a deleted request's scale-up not created yet; the created ones are left to scale-down",
		"reason", u.why, "cancelled", cancelled, "created", created)
	for _, un := range left {
		if !un.Empty() {
			return true
		}
	}
	return false
}

// undid reports whether a rollback call undid any of plan: left holds
// fewer instances or fewer unlisted ones for some group.
func undid(plan, left map[string]scaleup.Undo) bool {
	for g, un := range plan {
		rest := left[g]
		if len(rest.Instances) < len(un.Instances) || rest.Unlisted < un.Unlisted {
			return true
		}
	}
	return false
}

func sortedNames(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func describeShares(groups map[string]*share) string {
	parts := make([]string, 0, len(groups))
	for g, sh := range groups {
		part := fmt.Sprintf("%s: instances %v, %d not listed", g, sh.claimed, sh.unlisted())
		if len(sh.adopted) > 0 {
			part += fmt.Sprintf(", adopted (never deleted) %v", sh.adopted)
		}
		parts = append(parts, part)
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
