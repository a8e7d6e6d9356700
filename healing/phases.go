package healing

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// step is one loop's view of a heal being advanced.
type step struct {
	h       *Healer
	st      *state
	r       *heal
	node    *apiv1.Node // nil once the Node is gone
	loop    *processors.Loop
	save    func() bool
	logger  klog.Logger
	changed bool // a node group's size changed
}

// advance moves one heal on as far as it can in this loop; it reports
// whether it changed a node group's size.
func (h *Healer) advance(ctx context.Context, st *state, r *heal, nodes map[string]*apiv1.Node, loop *processors.Loop,
	save func() bool) bool {
	s := &step{h: h, st: st, r: r, node: nodes[r.Node], loop: loop, save: save,
		logger: klog.FromContext(ctx).WithValues("node", r.Node, "nodeGroup", r.Group)}
	ctx = klog.NewContext(ctx, s.logger)
	for {
		if limit := h.phaseLimit(r.Phase); limit > 0 && loop.Now.Sub(r.PhaseSince) > limit {
			switch {
			case r.Phase == PhaseFinishing:
				s.finishingTimedOut(limit)
				return s.changed
			case r.End == nil:
				s.end("failed", r.Phase+"Timeout", fmt.Sprintf("phase %s did not finish within %v (last error: %s)",
					r.Phase, limit, orNone(r.LastError)))
			}
			// Restoring tries once more, then ends the heal itself.
		}
		var next bool
		switch r.Phase {
		case PhaseStarting:
			next = s.starting(ctx)
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

// phaseLimit is how long a heal may stay in a phase that waits on
// something that may never come (a hook, the provider, an instance going)
// before it ends as failed; 0 for the phases with a rule of their own.
func (h *Healer) phaseLimit(phase string) time.Duration {
	switch phase {
	case PhaseStarting:
		return h.opts.MaxNodeProvisionTime + hookBudget(h.opts.Hooks, PhaseStart)
	case PhaseDeleting, PhaseFencing:
		return h.opts.MaxNodeProvisionTime
	case PhaseFinishing:
		return h.opts.MaxNodeProvisionTime + hookBudget(h.opts.Hooks, PhaseEnd)
	case PhaseRestoring:
		// A Node that cannot be updated (a webhook refusing it, RBAC) must
		// not hold a slot of --max-concurrent-heals for ever.
		return h.opts.MaxNodeProvisionTime
	}
	return 0
}

func (s *step) setPhase(p string) {
	s.logger.V(2).Info("Heal phase", "from", s.r.Phase, "to", p)
	s.r.Phase, s.r.PhaseSince, s.r.LastError = p, s.loop.Now, ""
}

// retry notes a transient error: the phase is tried again in the next loop,
// until its time runs out.
func (s *step) retry(err error, msg string) bool {
	s.r.LastError = err.Error()
	s.logger.Error(err, msg+"; retrying in the next loop")
	return false
}

// end ends a heal that will not replace its node: the node gets its own
// state back (PhaseRestoring), then the record goes.
func (s *step) end(result, reason, msg string) {
	s.r.End = &ending{Result: result, Reason: reason, Message: msg}
	s.setPhase(PhaseRestoring)
}

// stillNeeded re-checks the trigger just before anything is destroyed: a heal
// asked for with the annotation holds while the annotation stays, one of a
// policy while some policy's condition still holds.
func (s *step) stillNeeded() bool {
	if s.r.kind() == "annotation" {
		_, ok := s.node.Annotations[Annotation]
		return ok
	}
	_, _, ok := s.h.trigger(s.node, s.loop.Now)
	return ok
}

func (s *step) cancelled() {
	s.end("cancelled", "Recovered", "the node is healthy again (its trigger cleared) before its drain; nothing was removed")
}

func (s *step) starting(ctx context.Context) bool {
	h, r := s.h, s.r
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
	if atMin && !surge && !r.Increased {
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
	if r.Before == nil {
		r.Before = snapshotBefore(s.node)
		if !s.save() {
			return false
		}
	}
	if err := h.cordon(ctx, r.Node); err != nil {
		return s.retry(err, "Cordoning a node to heal")
	}
	if surge && !r.Increased {
		ok, err := h.increaseOnce(ctx, g, r, target, s.save)
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
	if r.Increased {
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
	done, err := h.hooks.result(ctx, h.opts.Hooks, h.hookRequest(r, PhaseStart), h.ignoredHook(r), h.opts.HookWait)
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

// restoring gives the node of a heal that ended without replacing it back
// its own state, retried until the phase's limit; past it the heal ends
// all the same, saying the node could not be given back. It reports whether
// heal_end is to be called now.
func (s *step) restoring(ctx context.Context) bool {
	h, r, e := s.h, s.r, s.r.End
	if err := h.restore(ctx, r); err != nil {
		limit := h.phaseLimit(PhaseRestoring)
		if s.loop.Now.Sub(r.PhaseSince) <= limit {
			return s.retry(err, "Giving a node back its state after its heal ended")
		}
		s.logger.Error(err, "The node could not be given back its state after its heal ended; the heal ends without it",
			"limit", limit, "end", e.Reason)
		e.Message = fmt.Sprintf("%s: %s; the node could not be given back its own state within %v (last error: %v): "+
			"check its unschedulable, its %s taint and its %s annotation", e.Reason, e.Message, limit, err, Taint, scaleDownDisabled)
		e.Result, e.Reason, e.Outcome = "failed", "RestoringTimeout", OutcomeFailed
	} else {
		switch {
		case e.Result == "cancelled":
			e.Outcome = OutcomeCancelled
		case r.DeleteIssued:
			e.Outcome = OutcomeFailed
		default:
			e.Outcome = OutcomeRestored
		}
	}
	h.finish(s.st, r, s.loop.Now, e.Result, e.Reason, e.Message)
	return s.st.Heals[r.Node] == r && r.Phase == PhaseFinishing
}

// finishing calls the heal_end hooks, once, with the heal's outcome, and
// ends the heal. A heal_end that fails on a heal that had ended already
// (failed, cancelled) is reported and not called again; the outcome stays.
func (s *step) finishing(ctx context.Context) bool {
	h, r, now := s.h, s.r, s.loop.Now
	done, err := h.hooks.result(ctx, h.opts.Hooks, h.hookRequest(r, PhaseEnd), h.ignoredHook(r), h.opts.HookWait)
	if !done {
		return false
	}
	switch {
	case r.End == nil && err != nil:
		h.finish(s.st, r, now, "failed", "HookFailed", "heal_end: "+err.Error()+"; the node was replaced")
	case r.End == nil:
		h.finish(s.st, r, now, "succeeded", "Replaced", "the node was replaced and its replacement is Ready")
	default:
		msg := r.End.Message
		if err != nil {
			h.event(r, apiv1.EventTypeWarning, "HealHookFailed", "heal_end failed for a heal that had ended (%s, %s); not called again: %v",
				r.End.Outcome, r.End.Reason, err)
			msg += "; heal_end: " + err.Error()
		}
		h.finish(s.st, r, now, r.End.Result, r.End.Reason, msg)
	}
	return false
}

// finishingTimedOut ends a heal whose heal_end hooks did not answer within
// the phase's limit; they are not called again.
func (s *step) finishingTimedOut(limit time.Duration) {
	msg := fmt.Sprintf("heal_end did not answer within %v; not called again", limit)
	if e := s.r.End; e != nil {
		s.h.finish(s.st, s.r, s.loop.Now, e.Result, e.Reason, e.Message+"; "+msg)
		return
	}
	s.h.finish(s.st, s.r, s.loop.Now, "failed", "FinishingTimeout", "the node was replaced; "+msg)
}

func (s *step) surging(ctx context.Context) bool {
	if s.node != nil && !s.stillNeeded() {
		s.cancelled()
		return true
	}
	if s.h.readyInGroup(ctx, s.r, s.loop) <= s.r.ReadyBefore {
		if s.loop.Now.Sub(s.r.PhaseSince) <= s.h.opts.MaxNodeProvisionTime {
			return false
		}
		s.logger.Info("The replacement is not Ready within --max-node-provision-time; draining all the same")
	}
	s.setPhase(PhaseDraining)
	return true
}

func (s *step) draining(ctx context.Context) bool {
	h, r := s.h, s.r
	if s.node == nil {
		r.DeleteIssued = true // gone already: nothing to delete
		s.setPhase(PhaseDeleting)
		return true
	}
	left := h.evict(ctx, s.node, s.loop)
	if left > 0 {
		if s.loop.Now.Sub(r.PhaseSince) <= h.opts.MaxPodEvictionTime {
			return false
		}
		if nodeReady(s.node) {
			s.end("failed", "EvictionTimeout", fmt.Sprintf("%d pods not evicted within --max-pod-eviction-time (%v); the node is given back as it was",
				left, h.opts.MaxPodEvictionTime))
			return true
		}
		// The node does not answer: its pods cannot terminate, and it may
		// still run them. Its instance goes first; the pods are cleared only
		// once its group no longer lists it.
		r.Fence = true
		s.logger.Info("Pods left on a node that is not Ready; deleting its instance before they are cleared", "pods", left)
	}
	s.setPhase(PhaseDeleting)
	return true
}

func (s *step) deleting(ctx context.Context) bool {
	h, r := s.h, s.r
	if !r.DeleteIssued {
		switch {
		case s.node == nil || s.node.DeletionTimestamp != nil:
			r.DeleteIssued = true
		case r.Fence && nodeReady(s.node):
			// The node answers again: its pods can leave by eviction now.
			r.Fence = false
			s.logger.Info("The node is Ready again before its instance was deleted; draining it again")
			s.setPhase(PhaseDraining)
			return false
		case r.ProviderID != "" && s.node.Spec.ProviderID != r.ProviderID:
			s.end("failed", "NodeReplaced", fmt.Sprintf("the node now names instance %s, not %s, which the heal started on; nothing deleted",
				s.node.Spec.ProviderID, r.ProviderID))
			return true
		default:
			g, err := h.group(ctx, s.node)
			if err != nil {
				return s.retry(err, "Looking up the group of a node to delete")
			}
			if g == nil || g.Id() != r.Group {
				s.end("failed", "NoNodeGroup", "the node no longer belongs to its node group "+r.Group+"; nothing deleted")
				return true
			}
			if r.Instance == "" {
				// Recorded before the delete, so that the fence waits for
				// exactly this instance to leave its group's listing.
				if r.Instance = h.instanceOfNode(ctx, g, s.node); r.Instance != "" && !s.save() {
					return false
				}
			}
			if err := g.DeleteNodes(ctx, []*apiv1.Node{s.node}); err != nil {
				if errors.Is(err, cloudprovider.ErrNotImplemented) {
					// The group cannot delete this instance by name:
					// never let it pick another one.
					s.end("failed", "CannotDeleteByName", "the node group cannot delete this instance by name: "+err.Error())
					return true
				}
				return s.retry(err, "Deleting a node being healed")
			}
			r.DeleteIssued, s.changed = true, true
			s.logger.Info("Deleted a node being healed", "providerID", r.ProviderID, "fence", r.Fence)
			if !s.save() {
				return false
			}
		}
	}
	if !r.Increased {
		g, err := h.groupByID(ctx, r.Group)
		if err != nil {
			return s.retry(err, "Finding the group of a healed node")
		}
		if g == nil {
			s.end("failed", "NoNodeGroup", "the node's group is gone; no replacement")
			return true
		}
		target, err := g.TargetSize(ctx)
		if err == nil {
			_, err = h.increaseOnce(ctx, g, r, target, s.save)
		}
		if err != nil {
			return s.retry(err, "Asking for the replacement of a healed node")
		}
		s.changed = true
		s.logger.Info("Asked for the replacement of a healed node")
	}
	if r.Fence {
		s.setPhase(PhaseFencing)
	} else {
		s.setPhase(PhaseReplacing)
	}
	return true
}

// fencing waits until the instance of a node that kept pods is gone, as
// its provider matches Nodes to instances (instanceGone); only then may
// anything clear the pods (Kubernetes' pod
// garbage collector does, once the Node is gone or carries the
// out-of-service taint). Pods are never deleted by the heal itself.
func (s *step) fencing(ctx context.Context) bool {
	gone, why, err := s.h.instanceGone(ctx, s.r, s.node)
	if err != nil {
		return s.retry(err, "Checking that the instance of a fenced node is gone")
	}
	if !gone {
		s.logger.V(2).Info("Waiting for the instance of a fenced node to be gone", "providerID", s.r.ProviderID,
			"instance", s.r.Instance, "seen", why)
		return false
	}
	if s.node != nil && !s.r.OutOfService {
		if err := s.h.markOutOfService(ctx, s.r.Node); err != nil {
			return s.retry(err, "Marking a node whose instance is gone out of service")
		}
		s.r.OutOfService = true
		s.logger.Info("The instance of a fenced node is gone; node marked out of service so its pods are removed")
	}
	s.setPhase(PhaseReplacing)
	return true
}

func (s *step) replacing(ctx context.Context) bool {
	if s.h.readyInGroup(ctx, s.r, s.loop) <= s.r.ReadyBefore {
		if s.loop.Now.Sub(s.r.PhaseSince) > s.h.opts.MaxNodeProvisionTime {
			s.h.finish(s.st, s.r, s.loop.Now, "failed", "ReplacementNotReady",
				fmt.Sprintf("no replacement Ready within --max-node-provision-time (%v)", s.h.opts.MaxNodeProvisionTime))
		}
		return false
	}
	s.setPhase(PhaseFinishing)
	return true
}

// increaseOnce asks for the replacement unless a previous run already did:
// the target before the increase is recorded first, and a target found
// above it means the increase went through. It reports whether it asked now.
func (h *Healer) increaseOnce(ctx context.Context, g cloudprovider.NodeGroup, r *heal, target int, save func() bool) (bool, error) {
	if r.TargetBefore != nil && target > *r.TargetBefore {
		r.Increased = true
		return false, nil
	}
	r.TargetBefore = &target
	if !save() {
		return false, errors.New("the healing state could not be written before the increase")
	}
	if err := g.IncreaseSize(ctx, 1); err != nil {
		return false, err
	}
	r.Increased = true
	return true, nil
}

// finish ends a heal: a heal that owes heal_end goes to Finishing first,
// its end kept for it (End); then event, metrics, cooldown, record removed.
func (h *Healer) finish(st *state, r *heal, now time.Time, result, reason, msg string) {
	if r.endOwed() && r.Phase != PhaseFinishing {
		outcome := OutcomeFailed
		switch {
		case r.End != nil && r.End.Outcome != "":
			outcome = r.End.Outcome
		case result == "succeeded":
			outcome = OutcomeHealed
		case result == "cancelled":
			outcome = OutcomeCancelled
		}
		r.End = &ending{Result: result, Reason: reason, Message: msg, Outcome: outcome}
		r.Phase, r.PhaseSince, r.LastError = PhaseFinishing, now, ""
		return
	}
	typ, event := apiv1.EventTypeNormal, "HealSucceeded"
	switch result {
	case "failed":
		typ, event = apiv1.EventTypeWarning, "HealFailed"
	case "cancelled":
		event = "HealCancelled"
	}
	h.event(r, typ, event, "%s: %s (node group %s, reason: %s)", reason, msg, r.Group, r.Reason)
	h.metrics.heals.WithLabelValues(result, reason).Inc()
	h.metrics.duration.WithLabelValues(result).Observe(now.Sub(r.Started).Seconds())
	st.Cooldown[r.Node] = now.Add(h.opts.Cooldown)
	delete(st.Heals, r.Node)
	h.hooks.forget(r.Node)
}

func (h *Healer) hookRequest(r *heal, phase string) HookRequest {
	req := HookRequest{Phase: phase, Node: r.Node, NodeGroup: r.Group, ProviderID: r.ProviderID, Reason: r.Reason,
		ControlPlane: r.ControlPlane, Started: r.Started}
	if phase == PhaseEnd {
		req.Outcome, req.OutcomeReason = OutcomeHealed, "Replaced"
		if r.End != nil {
			req.Outcome, req.OutcomeReason = r.End.Outcome, r.End.Reason
		}
	}
	return req
}

func (h *Healer) ignoredHook(r *heal) func(string, error) {
	return func(name string, err error) {
		h.event(r, apiv1.EventTypeWarning, "HealHookFailed", "Hook %s failed, ignored (failurePolicy Ignore): %v", name, err)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
