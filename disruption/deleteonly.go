package disruption

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// The delete-only reasons (Empty, Underutilized) are scale-down's: its
// planner finds the nodes and its actuator removes them, with upstream's
// behaviour and flags (the ToBeDeleted taint, --node-delete-delay-after-taint,
// the drain rules, the delay-deletion annotations, --max-scale-down-parallelism
// and --max-drain-parallelism). The engine admits each removal before the
// actuator starts it and keeps it on record until it ends:
//
//   - a node in one of the engine's plans is never removed by scale-down, and
//     a node scale-down removes is never taken by a plan (positively, by name,
//     besides the taints each side reads fresh before it writes);
//   - an operator's budget that names empty or underutilized holds scale-down
//     back per node group (counting the group's nodes disrupted for every
//     reason); without such a budget nothing but upstream's limits applies;
//   - the removals count among a group's nodes disrupting for the other
//     reasons' budgets, show in the status, in disruption_nodes and
//     disruption_decisions_total, and in InFlight;
//   - each removal and its phase (Starting, Draining, Deleting) is written in
//     the state ConfigMap with the loop's other writes, so a new leader knows
//     what its predecessor left: a node still there without the ToBeDeleted
//     taint (the start-up clean-up lifted it, as upstream's does) is counted
//     cancelled and goes back to scale-down; a node gone is counted completed;
//     a node the provider is still deleting is waited for, at most
//     MaxNodeProvisionTime.

// Removal is one node scale-down asks to remove.
type Removal struct {
	Node       string
	Group      string
	ProviderID string
	// Reason is Empty or Underutilized (scale-down's unready nodes).
	Reason Reason
	// Why is scale-down's own reason (empty, underutilized, unready).
	Why string
}

// removal is a scale-down removal on record.
type removal struct {
	Node       string    `json:"node"`
	Group      string    `json:"group"`
	ProviderID string    `json:"providerID,omitempty"`
	For        Reason    `json:"for"`
	Why        string    `json:"why,omitempty"`
	Phase      string    `json:"phase"`
	Started    time.Time `json:"started"`
	PhaseSince time.Time `json:"phaseSince"`
	// Owner is the process that admitted it (the engine's run id): a
	// record of another owner was left by a previous leader.
	Owner string `json:"owner"`
}

// removals are the engine's scale-down removals: those this process
// admitted (mine), those a previous leader left (left), and whether the
// record changed since the last write.
type removals struct {
	owner string
	mine  map[string]*removal
	left  map[string]*removal
	dirty bool
	// groupSize is, per node group, the autoscaled nodes of the last loop
	// the engine saw (the budgets' group sizes).
	groupSize map[string]int
}

func newRemovals() removals {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return removals{owner: hex.EncodeToString(b), mine: map[string]*removal{}, left: map[string]*removal{},
		groupSize: map[string]int{}}
}

// DeleteOnly reports whether r is one of scale-down's reasons (Empty,
// Underutilized): budgets hold them back only when they name them, so that
// scale-down keeps upstream's limits unless an operator asks for more.
func DeleteOnly(r Reason) bool { return r == Empty || r == Underutilized }

// AdmitRemovals is asked by scale-down before it starts removing nodes (all
// of them together when atomic: a zeroOrMaxNodeScaling group goes whole or
// not at all). It returns the nodes it holds back, with why; the others are
// on record from now on (RemovalPhase, RemovalEnded).
func (h *Engine) AdmitRemovals(ctx context.Context, now time.Time, rs []Removal, atomic bool) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rmu.Lock()
	defer h.rmu.Unlock()
	held := map[string]string{}
	disrupting := h.disruptingLocked()
	taken := map[string]int{}
	for _, r := range rs {
		if p := h.planOf(r.Node); p != nil {
			held[r.Node] = fmt.Sprintf("the disruption engine is removing it (%s)", p.For)
			continue
		}
		if !DeleteOnly(r.Reason) {
			held[r.Node] = fmt.Sprintf("%q is not a scale-down reason", r.Reason)
			continue
		}
		size := h.rm.groupSize[r.Group]
		if allowed := h.budget.Allowed(r.Group, r.Reason, size, disrupting[r.Group]+taken[r.Group], now); allowed < 1 {
			held[r.Node] = fmt.Sprintf("the disruption budget of node group %s for %s allows no more now (%d of its %d nodes disrupting)",
				r.Group, r.Reason, disrupting[r.Group]+taken[r.Group], size)
			continue
		}
		taken[r.Group]++
	}
	if atomic && len(held) > 0 {
		for _, r := range rs {
			if held[r.Node] == "" {
				held[r.Node] = "another node of its zeroOrMaxNodeScaling group is held back"
			}
		}
	}
	logger := klog.FromContext(ctx).WithName("disruption")
	for _, r := range rs {
		if why := held[r.Node]; why != "" {
			action := ActionSkippedBudget
			if h.planOf(r.Node) != nil {
				action = ActionSkippedProtected
			}
			if DeleteOnly(r.Reason) {
				h.dm.decisions.WithLabelValues(string(r.Reason), action).Inc()
			}
			logger.V(2).Info("Scale-down of a node held back", "node", r.Node, "nodeGroup", r.Group, "why", why)
			continue
		}
		delete(h.rm.left, r.Node)
		h.rm.mine[r.Node] = &removal{Node: r.Node, Group: r.Group, ProviderID: r.ProviderID, For: r.Reason, Why: r.Why,
			Phase: PhaseStarting, Started: now, PhaseSince: now, Owner: h.rm.owner}
		h.rm.dirty = true
		h.dm.decisions.WithLabelValues(string(r.Reason), ActionStarted).Inc()
	}
	return held
}

// RemovalPhase records that scale-down's removal of node reached phase
// (PhaseDraining: tainted, its pods evicted if it has any; PhaseDeleting:
// the provider asked to delete it).
func (h *Engine) RemovalPhase(node, phase string, now time.Time) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	if r := h.rm.mine[node]; r != nil && r.Phase != phase {
		r.Phase, r.PhaseSince = phase, now
		h.rm.dirty = true
	}
}

// RemovalEnded records how scale-down's removal of node ended: action is
// ActionCompleted (deleted), ActionFailed or ActionCancelled. A removal
// that ended already is not counted again.
func (h *Engine) RemovalEnded(node, action string) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	r := h.rm.mine[node]
	if r == nil {
		return
	}
	delete(h.rm.mine, node)
	h.rm.dirty = true
	h.dm.decisions.WithLabelValues(string(r.For), action).Inc()
}

// planOf returns the plan in flight that takes node (nil: none); h.mu held.
func (h *Engine) planOf(node string) *plan {
	if h.st == nil {
		return nil
	}
	for _, p := range h.st.Heals {
		for _, m := range p.Nodes {
			if m.Node == node {
				return p
			}
		}
	}
	return nil
}

// disruptingLocked counts, per node group, the nodes of the plans in flight
// and of scale-down's removals; h.mu and h.rmu held.
func (h *Engine) disruptingLocked() map[string]int {
	out := map[string]int{}
	if h.st != nil {
		for _, p := range h.st.Heals {
			for _, m := range p.Nodes {
				out[m.Group]++
			}
		}
	}
	for _, rs := range []map[string]*removal{h.rm.mine, h.rm.left} {
		for _, r := range rs {
			out[r.Group]++
		}
	}
	return out
}

// removalsLocked returns copies of scale-down's removals on record, in
// node order: this process's and those a previous leader left (h.rmu held;
// the actuator changes the records, so a caller reads the copies after it
// lets go of h.rmu).
func (h *Engine) removalsLocked() []removal {
	out := make([]removal, 0, len(h.rm.mine)+len(h.rm.left))
	for _, rs := range []map[string]*removal{h.rm.mine, h.rm.left} {
		for _, r := range rs {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// importRemovals takes, once the state is read (h.mu held), the removals a
// previous leader left; this process's own are known already.
func (h *Engine) importRemovals(st *state) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	for n, r := range st.ScaleDown {
		if r == nil || r.Owner == h.rm.owner || h.rm.mine[n] != nil || h.rm.left[n] != nil {
			continue
		}
		h.rm.left[n] = r
	}
}

// exportRemovals writes the removals on record into st (h.mu held) and
// reports whether they changed since the last write.
func (h *Engine) exportRemovals(st *state) bool {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	changed := h.rm.dirty
	h.rm.dirty = false
	st.ScaleDown = map[string]*removal{}
	for _, r := range h.removalsLocked() {
		st.ScaleDown[r.Node] = &r
	}
	return changed
}

// settleLeftRemovals ends the removals a previous leader left (h.mu held);
// it only counts and reports, it removes nothing. A Node of the name is the
// node still there (no provider ID comparison: it cannot tell an instance
// that replaced it, and still there is the safe reading). A node gone was
// removed; a node still there without the ToBeDeleted taint
// (lifted by the start-up clean-up) goes back to scale-down; a node the
// provider is still deleting is waited for, at most MaxNodeProvisionTime
// from its last phase. It reports whether any ended.
func (h *Engine) settleLeftRemovals(ctx context.Context, nodes map[string]*apiv1.Node, now time.Time) bool {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	logger := klog.FromContext(ctx)
	wait := h.opts.MaxNodeProvisionTime
	if wait <= 0 {
		wait = 15 * time.Minute
	}
	ended := false
	for name, r := range h.rm.left {
		n := nodes[name]
		var action, msg string
		switch {
		case n == nil:
			action, msg = ActionCompleted, "the node is gone"
		case !hasTaintKey(n, ScaleDownTaint):
			action, msg = ActionCancelled, "the node is still there, without the ToBeDeleted taint: scale-down may take it again"
		case now.Sub(r.PhaseSince) > wait:
			action, msg = ActionFailed, fmt.Sprintf("the node still carries the ToBeDeleted taint %v after the removal's last phase", wait)
		default:
			continue
		}
		delete(h.rm.left, name)
		h.rm.dirty, ended = true, true
		h.dm.decisions.WithLabelValues(string(r.For), action).Inc()
		logger.Info("A scale-down a previous leader started has ended", "node", name, "nodeGroup", r.Group,
			"phase", r.Phase, "outcome", action, "why", msg)
		if action == ActionCancelled {
			h.recorder.Eventf(&apiv1.ObjectReference{Kind: "Node", Name: name, UID: n.UID}, apiv1.EventTypeNormal,
				"DisruptionCancelled", "The scale-down (%s) a previous leader started on this node was cut short (phase %s): %s",
				r.For, r.Phase, msg)
		}
	}
	return ended
}
