package disruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// step is one loop's view of a plan being advanced.
type step struct {
	h     *Engine
	st    *state
	r     *plan
	nodes map[string]*apiv1.Node // this loop's nodes; a plan's node missing is gone
	// node is the plan's first node (nil once gone): a heal's only node.
	node    *apiv1.Node
	loop    *processors.Loop
	props   proposals
	save    func() bool
	logger  klog.Logger
	changed bool // a node group's size changed
}

// advance moves one plan on as far as it can in this loop; it reports
// whether it changed a node group's size.
func (h *Engine) advance(ctx context.Context, st *state, r *plan, nodes map[string]*apiv1.Node, loop *processors.Loop,
	props proposals, save func() bool) bool {
	s := &step{h: h, st: st, r: r, nodes: nodes, node: nodes[r.Node], loop: loop, props: props, save: save,
		logger: klog.FromContext(ctx).WithValues("node", r.Node, "nodeGroup", r.Group, "reason", r.For)}
	ctx = klog.NewContext(ctx, s.logger)
	for {
		if limit := h.phaseLimit(r, r.Phase); limit > 0 && loop.Now.Sub(r.PhaseSince) > limit {
			switch {
			case r.Phase == PhaseFinishing:
				s.finishingTimedOut(limit)
				return s.changed
			case r.End == nil:
				s.end("failed", r.Phase+"Timeout", fmt.Sprintf("phase %s did not finish within %v (last error: %s)",
					r.Phase, limit, orNone(r.LastError)))
			}
			// Restoring tries once more, then ends the plan itself.
		}
		var next bool
		switch r.Phase {
		case PhaseStarting:
			if r.For == Unhealthy {
				next = s.starting(ctx)
			} else {
				next = s.startingPlan(ctx)
			}
		case PhaseSurging:
			next = s.surging(ctx)
		case PhaseDraining:
			next = s.draining(ctx)
		case PhaseDeleting:
			next = s.deleting(ctx)
		case PhaseFencing:
			next = s.fencing(ctx)
		case PhaseReplacing:
			next = s.replacing(ctx)
		case PhaseFinishing:
			next = s.finishing(ctx)
		case PhaseRestoring:
			next = s.restoring(ctx)
		default:
			s.end("failed", "UnknownPhase", "unknown phase "+r.Phase)
			next = true
		}
		if !next {
			return s.changed
		}
	}
}

// hooksOf are the hooks of plan r: healing's, for heals; none otherwise.
func (h *Engine) hooksOf(r *plan) []Hook {
	if r.For == Unhealthy {
		return h.opts.Hooks
	}
	return nil
}

// phaseLimit is how long a plan may stay in a phase that waits on
// something that may never come (a hook, the provider, an instance going)
// before it ends as failed; 0 for the phases with a rule of their own.
func (h *Engine) phaseLimit(r *plan, phase string) time.Duration {
	switch phase {
	case PhaseStarting:
		return h.opts.MaxNodeProvisionTime + hookBudget(h.hooksOf(r), PhaseStart)
	case PhaseDeleting, PhaseFencing:
		return h.opts.MaxNodeProvisionTime
	case PhaseFinishing:
		return h.opts.MaxNodeProvisionTime + hookBudget(h.hooksOf(r), PhaseEnd)
	case PhaseRestoring:
		// A Node that cannot be updated (a webhook refusing it, RBAC) must
		// not hold a slot of --max-concurrent-heals for ever.
		return h.opts.MaxNodeProvisionTime
	}
	return 0
}

func (s *step) setPhase(p string) {
	s.logger.V(2).Info("Disruption phase", "from", s.r.Phase, "to", p)
	s.r.Phase, s.r.PhaseSince, s.r.LastError = p, s.loop.Now, ""
}

// retry notes a transient error: the phase is tried again in the next loop,
// until its time runs out.
func (s *step) retry(err error, msg string) bool {
	s.r.LastError = err.Error()
	s.logger.Error(err, msg+"; retrying in the next loop")
	return false
}

// end ends a plan that will not remove its nodes: they get their own state
// back (PhaseRestoring), then the record goes.
func (s *step) end(result, reason, msg string) {
	s.r.End = &ending{Result: result, Reason: reason, Message: msg}
	s.setPhase(PhaseRestoring)
}

// stillNeeded re-checks the reason just before anything is destroyed. A
// heal asked for with the annotation holds while the annotation stays, one
// of a policy while some policy's condition still holds. A voluntary
// plan holds while its source (when it answered in this loop) proposes
// every node of it and no node became protected; a reservation's end
// while its source proposes every node (the reservation was not extended
// past the drain window); an interruption holds.
func (s *step) stillNeeded() bool {
	switch {
	case s.r.For == Unhealthy && s.r.kind() == "annotation":
		_, ok := s.node.Annotations[Annotation]
		return ok
	case s.r.For == Unhealthy:
		_, _, ok := s.h.trigger(s.node, s.loop.Now)
		return ok
	case s.r.For == ReservationEnding:
		return s.props.proposed(s.r)
	case !voluntary(s.r.For):
		return true
	}
	if !s.props.proposed(s.r) {
		return false
	}
	for _, m := range s.r.Nodes {
		if n := s.nodes[m.Node]; n != nil {
			if ok, why := s.h.protected(n, s.loop, false, s.r.For); ok {
				s.logger.Info("A node of the disruption became protected before its drain", "protectedNode", m.Node, "why", why)
				return false
			}
		}
	}
	return true
}

func (s *step) cancelled() {
	if s.r.For == Unhealthy {
		s.end("cancelled", "Recovered", "the node is healthy again (its trigger cleared) before its drain; nothing was removed")
		return
	}
	s.end("cancelled", "NoLongerProposed", fmt.Sprintf("the reason (%s) no longer holds, or a node became protected, before the drain; nothing was removed", s.r.For))
}

// starting is a heal's start (healing's rules: the group's minimum, the
// replacement first when asked and possible, the heal_start hooks).
func (s *step) starting(ctx context.Context) bool {
	h, r := s.h, s.r
	m, rp := r.Nodes[0], r.Replacements[0]
	if r.StartCalled && !r.StartHooked {
		// heal_start is out (or was, before a restart: it is called again);
		// its answer comes before anything else, so heal_end never overtakes it.
		return s.startHooks(ctx)
	}
	if s.node == nil {
		s.end("failed", "NodeGone", "the node disappeared before the heal touched it")
		return true
	}
	if !s.stillNeeded() {
		s.cancelled()
		return true
	}
	g, err := h.group(ctx, s.node)
	if err != nil {
		return s.retry(err, "Looking up the group of a node to heal")
	}
	if g == nil {
		s.end("failed", "NoNodeGroup", "the node no longer belongs to an autoscaled node group")
		return true
	}
	target, err := g.TargetSize(ctx)
	if err != nil {
		return s.retry(fmt.Errorf("reading the target size of %s: %w", g.Id(), err), "Reading a group's size")
	}
	atMin := target <= g.MinSize()
	surge := (h.opts.ReplaceFirst || atMin) && target < g.MaxSize()
	if atMin && !surge && !rp.Increased {
		s.end("failed", "GroupAtMinimum", fmt.Sprintf("node group %s is at its minimum size (%d) and its maximum (%d): "+
			"removing the node would break the minimum and no replacement can be asked for first; the node was not touched",
			g.Id(), g.MinSize(), g.MaxSize()))
		return true
	}
	if !r.endOwed() {
		// The heal will go on: heal_start now, recorded before it is called
		// so that heal_end follows it, exactly once, even after a restart.
		r.StartCalled = true
		if !s.save() {
			r.StartCalled = false
			return false
		}
		return s.startHooks(ctx)
	}
	if m.Before == nil {
		m.Before = snapshotBefore(s.node)
		if !s.save() {
			return false
		}
	}
	if err := h.cordon(ctx, m.Node); err != nil {
		if s.yieldToScaleDown(err) {
			return true
		}
		return s.retry(err, "Cordoning a node to heal")
	}
	if surge && !rp.Increased {
		// Asked now, a backed-off group would most likely fail again.
		if group, why := h.backedOffGroup(r.Replacements, s.loop.Now); group != "" {
			if atMin {
				return s.retry(fmt.Errorf("node group %s is backed off: %s", group, why),
					"Not asking for the replacement of a node of a group at its minimum size while the group is backed off")
			}
			s.logger.Info("The node's group is backed off: its replacement is asked for after the removal, not before", "why", why)
			surge = false
		}
	}
	if surge && !rp.Increased {
		ok, err := h.increaseOnce(ctx, g, rp, target, s.save)
		switch {
		case err != nil && atMin:
			return s.retry(err, "Asking for the replacement of a node of a group at its minimum size")
		case err != nil:
			s.logger.Error(err, "Asking for the replacement before the removal; it is asked for after it")
		case ok:
			s.changed = true
			s.logger.Info("Asked for the replacement of a node being healed", "targetBefore", target)
		}
	}
	if rp.Increased {
		s.setPhase(PhaseSurging)
		return false
	}
	s.setPhase(PhaseDraining)
	return true
}

// errNotRecorded: the state could not be written before an increase, which
// was not asked for; the phase is retried.
var errNotRecorded = errors.New("the disruption state could not be written before the increase")

// startingPlan starts a plan of any other reason: its groups' sizes are
// checked, its nodes cordoned, its replacement asked for; a scale-up that
// fails ends the plan, its nodes given back.
func (s *step) startingPlan(ctx context.Context) bool {
	h, r := s.h, s.r
	for _, m := range r.Nodes {
		if s.nodes[m.Node] == nil {
			s.end("failed", "NodeGone", "node "+m.Node+" disappeared before the disruption touched it")
			return true
		}
	}
	if !s.stillNeeded() {
		s.cancelled()
		return true
	}
	fresh := true
	for _, m := range r.Nodes {
		fresh = fresh && m.Before == nil
	}
	groups := map[string]cloudprovider.NodeGroup{}
	removed, added := map[string]int{}, map[string]int{}
	for _, m := range r.Nodes {
		g, err := h.group(ctx, s.nodes[m.Node])
		if err != nil {
			return s.retry(err, "Looking up the group of a node to disrupt")
		}
		if g == nil || g.Id() != m.Group {
			s.end("failed", "NoNodeGroup", "node "+m.Node+" no longer belongs to its node group "+m.Group+"; nothing was touched")
			return true
		}
		groups[g.Id()] = g
		removed[g.Id()]++
	}
	for _, rp := range r.Replacements {
		g, err := h.groupByID(ctx, rp.Group)
		if err != nil {
			return s.retry(err, "Finding the group of a replacement")
		}
		if g == nil {
			s.end("failed", "NoNodeGroup", "the replacement's node group "+rp.Group+" is gone; nothing was touched")
			return true
		}
		groups[g.Id()] = g
		added[g.Id()] += rp.Count
	}
	targets := map[string]int{}
	for id, g := range groups {
		target, err := g.TargetSize(ctx)
		if err != nil {
			return s.retry(fmt.Errorf("reading the target size of %s: %w", id, err), "Reading a group's size")
		}
		targets[id] = target
		if !fresh {
			continue // checked before the plan touched anything
		}
		if added[id] > 0 && target+added[id] > g.MaxSize() {
			s.end("failed", "ReplacementGroupFull", fmt.Sprintf("node group %s (target %d, max %d) cannot take %d more nodes; nothing was touched",
				id, target, g.MaxSize(), added[id]))
			return true
		}
		if target+added[id]-removed[id] < g.MinSize() {
			s.end("failed", "GroupAtMinimum", fmt.Sprintf("removing %d nodes of node group %s (target %d) would break its minimum (%d); nothing was touched",
				removed[id], id, target, g.MinSize()))
			return true
		}
	}
	surge := true
	if group, why := h.backedOffGroup(r.Replacements, s.loop.Now); group != "" {
		if voluntary(r.For) {
			s.end("failed", "ReplacementGroupBackedOff", backedOffMessage(group, why))
			return true
		}
		// The node goes anyway: it is drained now, its replacement asked
		// for once it is deleted.
		s.logger.Info("The replacement's node group is backed off: draining without asking it first; the replacement is asked for after the removal",
			"replacementGroup", group, "why", why)
		surge = false
	}
	if fresh {
		for _, m := range r.Nodes {
			m.Before = snapshotBefore(s.nodes[m.Node])
		}
		if !s.save() {
			for _, m := range r.Nodes {
				m.Before = nil
			}
			return false
		}
	}
	for _, m := range r.Nodes {
		if err := h.cordon(ctx, m.Node); err != nil {
			if s.yieldToScaleDown(err) {
				return true
			}
			return s.retry(err, "Cordoning a node to disrupt")
		}
	}
	for _, rp := range r.Replacements {
		if rp.Increased || !surge {
			continue
		}
		if rp.Known == nil {
			rp.Known = h.groupNodeNames(ctx, s.loop, rp.Group)
		}
		ok, err := h.increaseOnce(ctx, groups[rp.Group], rp, targets[rp.Group], s.save)
		switch {
		case errors.Is(err, errNotRecorded):
			return false
		case err != nil:
			s.end("failed", "ScaleUpFailed", fmt.Sprintf("asking node group %s for %d nodes: %v; the nodes are given back as they were",
				rp.Group, rp.Count, err))
			return true
		case ok:
			s.changed = true
			s.logger.Info("Asked for the replacement of nodes being disrupted", "replacementGroup", rp.Group, "count", rp.Count)
		}
	}
	if len(r.Replacements) > 0 && surge {
		s.setPhase(PhaseSurging)
		return false
	}
	s.setPhase(PhaseDraining)
	return true
}

// startHooks waits for the heal_start hooks; once they answered, starting
// runs again (its checks with them).
func (s *step) startHooks(ctx context.Context) bool {
	h, r := s.h, s.r
	done, err := h.hooks.result(ctx, h.hooksOf(r), h.hookRequest(r, PhaseStart), h.ignoredHook(r), h.opts.HookWait)
	if !done {
		return false
	}
	if err != nil {
		s.end("failed", "HookFailed", "heal_start: "+err.Error()+"; the node was not touched")
		return true
	}
	r.StartHooked = true
	return true
}

// surging waits until the replacement asked for first is Ready. A heal
// whose replacement does not come in time drains all the same; a voluntary
// plan ends, its nodes given back. "In time" is --max-node-provision-time,
// or until Options.ReplacementHealth says the group asked failed since the
// ask (ReplacementFailed), whichever is first. An interruption does not
// wait: its instance goes within minutes whatever is decided (a Spot
// warning gives two), so its pods are moved while the replacement comes.
func (s *step) surging(ctx context.Context) bool {
	if s.node != nil && !s.stillNeeded() {
		s.cancelled()
		return true
	}
	if s.r.For == Interrupted && !s.h.replacementsReady(ctx, s.r, s.loop) {
		s.logger.Info("Draining an interrupted node without waiting for its replacement (its instance goes within minutes)",
			"replacement", replacementString(s.r))
		s.setPhase(PhaseDraining)
		return true
	}
	if !s.h.replacementsReady(ctx, s.r, s.loop) {
		// A group that failed since it was asked (back-off, an instance
		// that could not be created) ends the wait at once.
		group, why := s.h.failedReplacement(s.r, s.loop.Now)
		switch {
		case group == "" && s.loop.Now.Sub(s.r.PhaseSince) <= s.h.opts.MaxNodeProvisionTime:
			return false
		case group != "" && voluntary(s.r.For):
			s.end("failed", "ReplacementFailed", fmt.Sprintf("the replacement (%s) will not come: node group %s failed to give capacity "+
				"since it was asked (%s); the nodes are given back as they were", replacementString(s.r), group, why))
			return true
		case voluntary(s.r.For):
			s.end("failed", "ReplacementNotReady", fmt.Sprintf("the replacement (%s) was not Ready within --max-node-provision-time (%v); the nodes are given back as they were",
				replacementString(s.r), s.h.opts.MaxNodeProvisionTime))
			return true
		case group != "":
			s.logger.Info("The replacement's node group failed to give capacity since it was asked; draining all the same",
				"replacementGroup", group, "why", why)
		default:
			s.logger.Info("The replacement is not Ready within --max-node-provision-time; draining all the same")
		}
	} else {
		s.r.Replaced = true
	}
	s.setPhase(PhaseDraining)
	return true
}

// draining evicts the pods of every node of the plan; the nodes are deleted
// once all are drained (or fenced).
func (s *step) draining(ctx context.Context) bool {
	h, r := s.h, s.r
	if r.For == ReservationEnding && s.reservationExtended() {
		// The capacity was paid for beyond the window: the node stays, and
		// what the drain moved so far stays where it went.
		s.end("cancelled", "ReservationExtended", fmt.Sprintf("the reserved capacity of %s no longer ends within the drain window "+
			"(extended); the drain stopped and the nodes are given back", joinNodes(r)))
		return true
	}
	r.DrainStarted = true
	done := true
	for _, m := range r.Nodes {
		node := s.nodes[m.Node]
		if m.DeleteIssued || m.Fence {
			continue
		}
		if node == nil {
			m.DeleteIssued = true // gone already: nothing to delete
			continue
		}
		left := h.evict(ctx, node, s.loop)
		if left == 0 {
			continue
		}
		if s.loop.Now.Sub(r.PhaseSince) <= h.opts.MaxPodEvictionTime {
			done = false
			continue
		}
		if nodeReady(node) {
			what := "the node is given back as it was"
			if len(r.Nodes) > 1 {
				what = "node " + m.Node + "; the nodes are given back as they were"
			}
			s.end("failed", "EvictionTimeout", fmt.Sprintf("%d pods not evicted within --max-pod-eviction-time (%v); %s",
				left, h.opts.MaxPodEvictionTime, what))
			return true
		}
		// The node does not answer: its pods cannot terminate, and it may
		// still run them. Its instance goes first; the pods are cleared only
		// once its group no longer lists it.
		m.Fence = true
		s.logger.Info("Pods left on a node that is not Ready; deleting its instance before they are cleared", "fenced", m.Node, "pods", left)
	}
	if !done {
		return false
	}
	s.setPhase(PhaseDeleting)
	return true
}

// reservationExtended reports, for a drain of reserved capacity that ends,
// that its source answered in this loop and no longer proposes a node of
// it that is Ready and not being deleted: the reservation was extended (or
// the node left its group). A node that is not Ready is not proposed
// either, and its drain goes on (to fencing, if it never answers again).
func (s *step) reservationExtended() bool {
	if !s.props.fresh[s.r.For] {
		return false
	}
	for _, m := range s.r.Nodes {
		n := s.nodes[m.Node]
		if n == nil || n.DeletionTimestamp != nil || m.DeleteIssued || m.Fence || !nodeReady(n) {
			continue
		}
		if !s.props.proposes(s.r.For, m.Node) {
			return true
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func joinNodes(r *plan) string { return strings.Join(planNodes(r), ", ") }
