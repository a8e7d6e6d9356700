package disruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// deleting deletes every node of the plan by name, each instance first
// positively identified; a heal whose replacement was not asked for first
// asks for it now.
func (s *step) deleting(ctx context.Context) bool {
	h, r := s.h, s.r
	for _, m := range r.Nodes {
		if m.DeleteIssued {
			continue
		}
		node := s.nodes[m.Node]
		switch {
		case node == nil || node.DeletionTimestamp != nil:
			m.DeleteIssued = true
		case m.Fence && nodeReady(node):
			// The node answers again: its pods can leave by eviction now.
			m.Fence = false
			s.logger.Info("The node is Ready again before its instance was deleted; draining it again", "fenced", m.Node)
			s.setPhase(PhaseDraining)
			return false
		case m.ProviderID != "" && cloudprovider.NormalizeProviderID(node.Spec.ProviderID) != cloudprovider.NormalizeProviderID(m.ProviderID):
			// Compared as the providers compare IDs: another instance now
			// behind the name is never deleted for this plan.
			s.end("failed", "NodeReplaced", fmt.Sprintf("node %s now names instance %s, not %s, which the disruption started on; nothing deleted",
				m.Node, node.Spec.ProviderID, m.ProviderID))
			return true
		default:
			g, err := h.group(ctx, node)
			if err != nil {
				return s.retry(err, "Looking up the group of a node to delete")
			}
			if g == nil || g.Id() != m.Group {
				s.end("failed", "NoNodeGroup", "node "+m.Node+" no longer belongs to its node group "+m.Group+"; nothing deleted")
				return true
			}
			if m.Instance == "" {
				// Recorded before the delete, so that the fence waits for
				// exactly this instance to leave its group's listing.
				if m.Instance = h.instanceOfNode(ctx, g, node); m.Instance != "" && !s.save() {
					return false
				}
			}
			if err := g.DeleteNodes(ctx, []*apiv1.Node{node}); err != nil {
				if errors.Is(err, cloudprovider.ErrNotImplemented) {
					// The group cannot delete this instance by name:
					// never let it pick another one.
					s.end("failed", "CannotDeleteByName", "the node group cannot delete this instance by name: "+err.Error())
					return true
				}
				return s.retry(err, "Deleting a node being disrupted")
			}
			m.DeleteIssued, s.changed = true, true
			if r.For == Unhealthy {
				s.logger.Info("Deleted a node being healed", "providerID", m.ProviderID, "fence", m.Fence)
			} else {
				s.logger.Info("Deleted a node being disrupted", "deleted", m.Node, "providerID", m.ProviderID, "fence", m.Fence)
			}
			if !s.save() {
				return false
			}
		}
	}
	for _, rp := range r.Replacements {
		if rp.Increased {
			continue
		}
		g, err := h.groupByID(ctx, rp.Group)
		if err != nil {
			return s.retry(err, "Finding the group of a healed node")
		}
		if g == nil {
			s.end("failed", "NoNodeGroup", "the node's group is gone; no replacement")
			return true
		}
		target, err := g.TargetSize(ctx)
		if err == nil {
			_, err = h.increaseOnce(ctx, g, rp, target, s.save)
		}
		if err != nil {
			return s.retry(err, "Asking for the replacement of a healed node")
		}
		s.changed = true
		s.logger.Info("Asked for the replacement of a healed node")
	}
	for _, m := range r.Nodes {
		if m.Fence {
			s.setPhase(PhaseFencing)
			return true
		}
	}
	s.setPhase(PhaseReplacing)
	return true
}

// fencing waits until the instance of every node that kept pods is gone,
// as its provider matches Nodes to instances (instanceGone); only then may
// anything clear the pods (Kubernetes' pod garbage collector does, once the
// Node is gone or carries the out-of-service taint). Pods are never deleted
// by the engine itself.
func (s *step) fencing(ctx context.Context) bool {
	for _, m := range s.r.Nodes {
		if !m.Fence || m.OutOfService {
			continue
		}
		node := s.nodes[m.Node]
		gone, why, err := s.h.instanceGone(ctx, m, node)
		if err != nil {
			return s.retry(err, "Checking that the instance of a fenced node is gone")
		}
		if !gone {
			s.logger.V(2).Info("Waiting for the instance of a fenced node to be gone", "fenced", m.Node, "providerID", m.ProviderID,
				"instance", m.Instance, "seen", why)
			return false
		}
		if node != nil {
			if err := s.h.markOutOfService(ctx, m.Node); err != nil {
				return s.retry(err, "Marking a node whose instance is gone out of service")
			}
			m.OutOfService = true
			s.logger.Info("The instance of a fenced node is gone; node marked out of service so its pods are removed", "fenced", m.Node)
		}
	}
	s.setPhase(PhaseReplacing)
	return true
}

func (s *step) replacing(ctx context.Context) bool {
	if (s.r.For == Unhealthy || !s.r.Replaced) && !s.h.replacementsReady(ctx, s.r, s.loop) {
		if s.loop.Now.Sub(s.r.PhaseSince) > s.h.opts.MaxNodeProvisionTime {
			s.h.finish(s.st, s.r, s.loop.Now, "failed", "ReplacementNotReady",
				fmt.Sprintf("no replacement Ready within --max-node-provision-time (%v)", s.h.opts.MaxNodeProvisionTime))
		}
		return false
	}
	s.setPhase(PhaseFinishing)
	return true
}

// restoring gives the nodes of a plan that ended without removing them
// back their own state, retried until the phase's limit; past it the plan
// ends all the same, saying the nodes could not be given back. It reports
// whether heal_end is to be called now.
func (s *step) restoring(ctx context.Context) bool {
	h, r, e := s.h, s.r, s.r.End
	var err error
	for _, m := range r.Nodes {
		if err = h.restore(ctx, m); err != nil {
			break
		}
	}
	if err != nil {
		limit := h.phaseLimit(r, PhaseRestoring)
		if s.loop.Now.Sub(r.PhaseSince) <= limit {
			return s.retry(err, "Giving a node back its state after its disruption ended")
		}
		s.logger.Error(err, "The node could not be given back its state after its disruption ended; the disruption ends without it",
			"limit", limit, "end", e.Reason)
		e.Message = fmt.Sprintf("%s: %s; the node could not be given back its own state within %v (last error: %v): "+
			"check its unschedulable, its %s taint and its %s annotation", e.Reason, e.Message, limit, err, Taint, scaleDownDisabled)
		e.Result, e.Reason, e.Outcome = "failed", "RestoringTimeout", OutcomeFailed
	} else {
		switch {
		case e.Result == "cancelled":
			e.Outcome = OutcomeCancelled
		case r.deleteIssued():
			e.Outcome = OutcomeFailed
		default:
			e.Outcome = OutcomeRestored
		}
	}
	h.finish(s.st, r, s.loop.Now, e.Result, e.Reason, e.Message)
	return s.st.Heals[r.Node] == r && r.Phase == PhaseFinishing
}

// finishing calls the heal_end hooks, once, with the heal's outcome, and
// ends the plan. A heal_end that fails on a heal that had ended already
// (failed, cancelled) is reported and not called again; the outcome stays.
func (s *step) finishing(ctx context.Context) bool {
	h, r, now := s.h, s.r, s.loop.Now
	done, err := h.hooks.result(ctx, h.hooksOf(r), h.hookRequest(r, PhaseEnd), h.ignoredHook(r), h.opts.HookWait)
	if !done {
		return false
	}
	switch {
	case r.End == nil && err != nil:
		h.finish(s.st, r, now, "failed", "HookFailed", "heal_end: "+err.Error()+"; the node was replaced")
	case r.End == nil && r.For == Unhealthy:
		h.finish(s.st, r, now, "succeeded", "Replaced", "the node was replaced and its replacement is Ready")
	case r.End == nil && len(r.Replacements) == 0:
		h.finish(s.st, r, now, "succeeded", "Removed", "the nodes were drained and deleted")
	case r.End == nil:
		h.finish(s.st, r, now, "succeeded", "Replaced", "the nodes were replaced ("+replacementString(r)+" Ready first), drained and deleted")
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

// increaseOnce asks for the replacement unless a previous run already did:
// the target before the increase is recorded first, and a target found
// above it means the increase went through. It reports whether it asked now.
func (h *Engine) increaseOnce(ctx context.Context, g cloudprovider.NodeGroup, rp *replacement, target int, save func() bool) (bool, error) {
	if rp.TargetBefore != nil && target > *rp.TargetBefore {
		rp.Increased = true
		return false, nil
	}
	rp.TargetBefore = &target
	if !save() {
		return false, errNotRecorded
	}
	if err := g.IncreaseSize(ctx, max(1, rp.Count)); err != nil {
		return false, err
	}
	rp.Increased = true
	return true, nil
}

// finish ends a plan: a heal that owes heal_end goes to Finishing first,
// its end kept for it (End); then event, metrics, cooldown, record removed.
func (h *Engine) finish(st *state, r *plan, now time.Time, result, reason, msg string) {
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
	action := ActionCompleted
	switch result {
	case "failed":
		action = ActionFailed
	case "cancelled":
		action = ActionCancelled
	}
	h.dm.decisions.WithLabelValues(string(r.For), action).Inc()
	if r.For == Unhealthy {
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
	} else {
		typ, event := apiv1.EventTypeNormal, "DisruptionSucceeded"
		switch result {
		case "failed":
			typ, event = apiv1.EventTypeWarning, "DisruptionFailed"
		case "cancelled":
			event = "DisruptionCancelled"
		}
		h.event(r, typ, event, "%s: %s (%s: %s; nodes %s; replacement: %s)", reason, msg, r.For, r.Reason, joinNodes(r),
			replacementString(r))
	}
	if r.For == Unhealthy || result != "succeeded" {
		for _, m := range r.Nodes {
			st.Cooldown[cooldownKey(r.For, m.Node)] = now.Add(h.opts.Cooldown)
		}
	}
	delete(st.Heals, r.Node)
	h.hooks.forget(r.Node)
}

func (h *Engine) hookRequest(r *plan, phase string) HookRequest {
	req := HookRequest{Phase: phase, Node: r.Node, NodeGroup: r.Group, Reason: r.Reason,
		ControlPlane: r.ControlPlane, Started: r.Started}
	if len(r.Nodes) > 0 {
		req.ProviderID = r.Nodes[0].ProviderID
	}
	if phase == PhaseEnd {
		req.Outcome, req.OutcomeReason = OutcomeHealed, "Replaced"
		if r.End != nil {
			req.Outcome, req.OutcomeReason = r.End.Outcome, r.End.Reason
		}
	}
	return req
}

func (h *Engine) ignoredHook(r *plan) func(string, error) {
	return func(name string, err error) {
		h.event(r, apiv1.EventTypeWarning, "HealHookFailed", "Hook %s failed, ignored (failurePolicy Ignore): %v", name, err)
	}
}
