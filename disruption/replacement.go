package disruption

import (
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ReplacementHealth says how node groups fare at giving capacity, as the
// cluster state sees them (builder.NewReplacementHealth: clusterstate's
// back-off and the instances whose creation failed). Both questions are
// asked with the loop's time.
type ReplacementHealth interface {
	// BackedOff reports whether group is backed off at now (a scale-up of
	// it failed lately), and why: no plan asks it for capacity then.
	BackedOff(group string, now time.Time) (bool, string)
	// FailedSince reports whether group was backed off, or had an instance
	// fail to be created, after since (when a plan asked it for capacity)
	// and up to now, and why. A target size that fell is not a failure:
	// another plan's deletion lowers it too.
	FailedSince(group string, since, now time.Time) (bool, string)
}

// Readiness says whether a node whose Ready condition is true is not ready
// yet as the cluster state judges it (builder.NewReadiness): a startup
// taint still keeps pods off it (the controllers' not-ready or
// uninitialized taints, --startup-taint, ...), or it has not published its
// devices (clusterstate's resource-unready nodes: the DRA ResourceSlices
// its group's template says its nodes publish, or a GPU node's extended
// resource, not there yet). Such a node is not a Ready replacement: the
// plan waits for it, as the pods it makes room for need it started.
type Readiness interface {
	NotReadyYet(group string, node *apiv1.Node) bool
}

// notReadyYet reports whether node of group, Ready by its condition, is
// not ready yet (false without a Readiness).
func (h *Engine) notReadyYet(group string, node *apiv1.Node) bool {
	return h.opts.Readiness != nil && h.opts.Readiness.NotReadyYet(group, node)
}

// backedOffGroup returns the first group of rps not asked for yet that the
// ReplacementHealth reports backed off at now, and why; "" when none (or
// no ReplacementHealth).
func (h *Engine) backedOffGroup(rps []*replacement, now time.Time) (group, why string) {
	if h.opts.ReplacementHealth == nil {
		return "", ""
	}
	for _, rp := range rps {
		if rp.Increased || rp.Count <= 0 {
			continue
		}
		if off, why := h.opts.ReplacementHealth.BackedOff(rp.Group, now); off {
			return rp.Group, why
		}
	}
	return "", ""
}

// failedReplacement returns the first group asked for capacity by r, since
// r entered its phase, that the ReplacementHealth reports failed since
// then, and why; "" when none (or no ReplacementHealth).
func (h *Engine) failedReplacement(r *plan, now time.Time) (group, why string) {
	if h.opts.ReplacementHealth == nil {
		return "", ""
	}
	for _, rp := range r.Replacements {
		if !rp.Increased {
			continue
		}
		if failed, why := h.opts.ReplacementHealth.FailedSince(rp.Group, r.PhaseSince, now); failed {
			return rp.Group, why
		}
	}
	return "", ""
}

// holdBackedOff reports whether candidate c must wait because the group of
// its replacement is backed off; it says so once per back-off (an event on
// its nodes and a log line), then only at a higher verbosity. Only the
// voluntary reasons wait: an interrupted node goes anyway, and its plan
// drains it without asking the group first (startingPlan).
func (h *Engine) holdBackedOff(logger klog.Logger, v *view, c Candidate) bool {
	if !voluntary(c.Reason) || h.opts.ReplacementHealth == nil {
		return false
	}
	var rps []*replacement
	for _, rp := range c.Replacement {
		rps = append(rps, &replacement{Group: rp.Group, Count: rp.Count})
	}
	group, why := h.backedOffGroup(rps, v.loop.Now)
	if group == "" {
		return false
	}
	key := string(c.Reason) + "/" + strings.Join(c.Nodes, ",")
	v.held[key] = group
	h.dm.decisions.WithLabelValues(string(c.Reason), ActionSkippedBackoff).Inc()
	if h.held[key] == group {
		logger.V(2).Info("Candidate waits: its replacement's node group is backed off", "replacementGroup", group, "why", why)
		return true
	}
	logger.Info("Candidate waits: its replacement's node group is backed off; it is not asked for capacity until the back-off ends",
		"replacementGroup", group, "why", why)
	for _, n := range c.Nodes {
		h.recorder.Eventf(&apiv1.ObjectReference{Kind: "Node", Name: n}, apiv1.EventTypeNormal, "DisruptionWaiting",
			"ReplacementGroupBackedOff: not disrupted (%s) yet: the node group of its replacement, %s, is backed off (%s); "+
				"it is not asked for capacity until the back-off ends", c.Reason, group, why)
	}
	return true
}

// backedOffMessage is the end message of a plan whose replacement group is
// backed off before it was asked.
func backedOffMessage(group, why string) string {
	return fmt.Sprintf("the replacement's node group %s is backed off (%s); it was not asked for capacity, and the nodes are given back as they were",
		group, why)
}
