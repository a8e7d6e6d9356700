package disruption

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

type candidate struct {
	node        *apiv1.Node
	group       cloudprovider.NodeGroup
	kind, why   string
	controlPlan bool
}

// view is one loop's facts the starts share: every autoscaled node's group,
// the group sizes, the nodes in flight and the nodes already claimed by a
// reason served earlier in this loop.
type view struct {
	loop      *processors.Loop
	nodes     map[string]*apiv1.Node
	groupOf   map[string]cloudprovider.NodeGroup
	groupSize map[string]int
	inFlight  map[string]*plan
	// disrupting counts, per group, the nodes of plans in flight.
	disrupting map[string]int
	claimed    map[string]Reason
	// held are the candidates waiting in this loop for a backed-off
	// replacement group (holdBackedOff).
	held map[string]string
}

func (h *Engine) newView(ctx context.Context, st *state, loop *processors.Loop) *view {
	v := &view{loop: loop, nodes: map[string]*apiv1.Node{}, groupOf: map[string]cloudprovider.NodeGroup{},
		groupSize: map[string]int{}, inFlight: map[string]*plan{}, disrupting: map[string]int{}, claimed: map[string]Reason{},
		held: map[string]string{}}
	for _, n := range loop.Nodes {
		v.nodes[n.Name] = n
		g, err := h.provider.NodeGroupForNode(ctx, n)
		if err != nil || g == nil {
			continue // not autoscaled (or not known this loop): never disrupted
		}
		v.groupOf[n.Name] = g
		v.groupSize[g.Id()]++
	}
	for _, r := range st.Heals {
		for _, m := range r.Nodes {
			v.inFlight[m.Node] = r
			v.disrupting[m.Group]++
		}
	}
	// Scale-down's removals count against the groups' budgets, and their
	// nodes are taken: no plan starts on them.
	h.rmu.Lock()
	h.rm.groupSize = v.groupSize
	for _, r := range h.removalsLocked() {
		v.disrupting[r.Group]++
		v.claimed[r.Node] = r.For
	}
	h.rmu.Unlock()
	return v
}

// start serves the reasons in their order (disruption.Reasons): a node
// proposed by several goes for the first; it reports whether the state
// changed.
func (h *Engine) start(ctx context.Context, st *state, loop *processors.Loop, props proposals) bool {
	v := h.newView(ctx, st, loop)
	changed := false
	for _, reason := range Reasons {
		if reason == Unhealthy {
			if h.opts.Healing && h.startHeals(ctx, st, v) {
				changed = true
			}
			continue
		}
		for _, c := range props.by[reason] {
			if h.startPlan(ctx, st, v, c) {
				changed = true
			}
		}
		for _, c := range props.by[reason] {
			for _, n := range c.Nodes {
				if _, ok := v.claimed[n]; !ok {
					v.claimed[n] = reason
				}
			}
		}
	}
	h.held = v.held
	return changed
}

// startHeals finds the nodes that need healing and starts as many heals as
// the limits allow (healing's rules: the breaker, --max-concurrent-heals,
// the cooldown, control-plane nodes only with hooks); it reports whether
// the state changed.
func (h *Engine) startHeals(ctx context.Context, st *state, v *view) bool {
	logger := klog.FromContext(ctx)
	loop := v.loop
	now := loop.Now
	groupSize := map[string]int{}
	var cands []candidate
	// unhealthy counts, per group, the nodes that need healing and the
	// heals in flight (whatever their node's conditions say now), so that
	// flapping nodes cannot take more than the breaker's share at once.
	unhealthy := map[string]int{}
	total := 0
	seen := map[string]bool{}
	for _, n := range loop.Nodes {
		g := v.groupOf[n.Name]
		if g == nil {
			continue
		}
		seen[n.Name] = true
		total++
		groupSize[g.Id()]++
		if r := v.inFlight[n.Name]; r != nil {
			if r.For == Unhealthy {
				unhealthy[g.Id()]++
			}
			continue
		}
		kind, why, ok := h.trigger(n, now)
		if !ok || n.DeletionTimestamp != nil {
			continue
		}
		if kind == string(apiv1.NodeReady) && now.Sub(n.CreationTimestamp.Time) < h.opts.MaxNodeProvisionTime {
			logger.V(4).Info("New node not healed yet for its Ready condition: younger than --max-node-provision-time",
				"node", n.Name, "created", n.CreationTimestamp.Time)
			continue
		}
		unhealthy[g.Id()]++
		if hasTaintKey(n, ScaleDownTaint) {
			continue
		}
		if r, ok := v.claimed[n.Name]; ok {
			logger.V(4).Info("Node needs healing but goes for an earlier reason", "node", n.Name, "reason", r)
			continue
		}
		cands = append(cands, candidate{node: n, group: g, kind: kind, why: why, controlPlan: isControlPlane(n)})
	}
	heals := 0
	for _, r := range st.Heals {
		if r.For != Unhealthy {
			continue
		}
		heals++
		for _, m := range r.Nodes {
			if !seen[m.Node] { // its Node is gone already: still in flight
				unhealthy[m.Group]++
				groupSize[m.Group]++
				total++
			}
		}
	}
	all := 0
	for _, c := range unhealthy {
		all += c
	}
	h.metrics.unhealthy.Set(float64(all))
	clusterTripped := all > max(1, int(h.opts.MaxUnhealthyPercent/100*float64(total)))
	changed := false
	for _, c := range cands {
		v.claimed[c.node.Name] = Unhealthy
		id := c.group.Id()
		switch {
		case clusterTripped:
			h.skip(c, "TooManyUnhealthyNodes", fmt.Sprintf("%d of the cluster's %d nodes need healing at once, more than %v%%: an outage, not a node fault; none is healed",
				all, total, h.opts.MaxUnhealthyPercent))
			continue
		case unhealthy[id] > max(1, int(h.opts.MaxUnhealthyPercent/100*float64(groupSize[id]))):
			h.skip(c, "TooManyUnhealthyNodes", fmt.Sprintf("%d of node group %s's %d nodes need healing at once, more than %v%%: an outage, not a node fault; none is healed",
				unhealthy[id], id, groupSize[id], h.opts.MaxUnhealthyPercent))
			continue
		case !st.Cooldown[c.node.Name].IsZero():
			logger.V(4).Info("Node in healing cooldown", "node", c.node.Name, "until", st.Cooldown[c.node.Name])
			continue
		case c.controlPlan && !hooksForControlPlane(h.opts.Hooks):
			h.skip(c, "ControlPlaneWithoutHooks", "a control-plane node is healed only when a hook is configured for control-plane nodes (controlPlane: true)")
			continue
		case heals >= h.opts.MaxConcurrent:
			logger.V(4).Info("Node waits: --max-concurrent-heals heals in flight", "node", c.node.Name, "inFlight", heals)
			h.dm.decisions.WithLabelValues(string(Unhealthy), ActionSkippedBudget).Inc()
			continue
		case h.opts.DryRun:
			h.skip(c, "DryRun", "would be healed ("+c.why+"), but --node-healing-dry-run is set")
			continue
		}
		ready := h.readyCount(ctx, loop, map[string]bool{c.node.Name: true})[id]
		r := &plan{Node: c.node.Name, Group: id, For: Unhealthy, Reason: c.kind + ": " + c.why, Kind: c.kind,
			Nodes:        []*member{{Node: c.node.Name, Group: id, ProviderID: c.node.Spec.ProviderID}},
			Replacements: []*replacement{{Group: id, Count: 1, ReadyBefore: ready}},
			Phase:        PhaseStarting, Started: now, PhaseSince: now, ControlPlane: c.controlPlan}
		st.Heals[r.Node] = r
		v.inFlight[r.Node] = r
		v.disrupting[id]++
		heals++
		h.metrics.started.WithLabelValues(c.kind).Inc()
		h.dm.decisions.WithLabelValues(string(Unhealthy), ActionStarted).Inc()
		h.event(r, apiv1.EventTypeNormal, "HealStarted", "Healing node %s of %s: %s", r.Node, r.Group, r.Reason)
		logger.Info("Healing a node", "node", r.Node, "nodeGroup", r.Group, "reason", r.Reason)
		changed = true
	}
	return changed
}

func (h *Engine) skip(c candidate, reason, msg string) {
	ref := &apiv1.ObjectReference{Kind: "Node", Name: c.node.Name, UID: c.node.UID}
	h.recorder.Eventf(ref, apiv1.EventTypeWarning, "HealSkipped", "%s: %s", reason, msg)
	h.metrics.heals.WithLabelValues("skipped", reason).Inc()
	action := ActionSkippedProtected
	if reason == "TooManyUnhealthyNodes" {
		action = ActionSkippedBudget
	}
	h.dm.decisions.WithLabelValues(string(Unhealthy), action).Inc()
}

// cooldownKey is the key of a node's cooldown for a reason: the node's
// name for heals (as the versions that only healed wrote it).
func cooldownKey(r Reason, node string) string {
	if r == Unhealthy {
		return node
	}
	return string(r) + "/" + node
}

// startPlan starts candidate c of a reason other than Unhealthy unless a
// node of it is in flight, claimed by an earlier reason, in cooldown, not
// autoscaled, protected (voluntary reasons) or over its group's budget;
// it reports whether it started it.
func (h *Engine) startPlan(ctx context.Context, st *state, v *view, c Candidate) bool {
	logger := klog.FromContext(ctx).WithValues("reason", c.Reason, "nodes", c.Nodes)
	now := v.loop.Now
	members := make([]*member, 0, len(c.Nodes))
	count := map[string]int{}
	names := map[string]bool{}
	for _, name := range c.Nodes {
		n, g := v.nodes[name], v.groupOf[name]
		switch {
		case names[name]:
			continue
		case v.inFlight[name] != nil:
			logger.V(4).Info("Candidate dropped: a node of it is being disrupted already", "node", name, "for", v.inFlight[name].For)
			return false
		case v.claimed[name] != "":
			logger.V(4).Info("Candidate dropped: a node of it goes for an earlier reason", "node", name, "for", v.claimed[name])
			return false
		case n == nil || g == nil || n.DeletionTimestamp != nil:
			logger.V(4).Info("Candidate dropped: a node of it is gone, going or not autoscaled", "node", name)
			return false
		case !st.Cooldown[cooldownKey(c.Reason, name)].IsZero():
			logger.V(4).Info("Candidate dropped: a node of it is in cooldown", "node", name)
			return false
		}
		if voluntary(c.Reason) {
			if ok, why := h.protected(n, v.loop, true, c.Reason); ok {
				logger.V(4).Info("Candidate dropped: a node of it is protected", "node", name, "why", why)
				h.dm.decisions.WithLabelValues(string(c.Reason), ActionSkippedProtected).Inc()
				return false
			}
		}
		names[name] = true
		count[g.Id()]++
		members = append(members, &member{Node: name, Group: g.Id(), ProviderID: n.Spec.ProviderID})
	}
	if len(members) == 0 {
		return false
	}
	whole := len(members)
	if len(c.Replacement) == 0 {
		members, count = h.withinBudget(v, c.Reason, members, now)
		if len(members) == 0 {
			h.dm.decisions.WithLabelValues(string(c.Reason), ActionSkippedBudget).Inc()
			logger.V(2).Info("Candidate waits: its node groups' disruption budgets allow none of its nodes now")
			return false
		}
	}
	for id, k := range count {
		if allowed := h.budget.Allowed(id, c.Reason, v.groupSize[id], v.disrupting[id], now); k > allowed {
			logger.V(2).Info("Candidate waits: over its node group's disruption budget", "nodeGroup", id, "nodes", k,
				"allowed", allowed, "disrupting", v.disrupting[id])
			h.dm.decisions.WithLabelValues(string(c.Reason), ActionSkippedBudget).Inc()
			return false
		}
	}
	if h.holdBackedOff(logger, v, c) {
		return false
	}
	ready := h.readyCount(ctx, v.loop, names)
	r := &plan{Node: members[0].Node, Group: members[0].Group, For: c.Reason, Nodes: members, Reason: c.Message,
		Phase: PhaseStarting, Started: now, PhaseSince: now, SavingPerHour: c.SavingPerHour}
	if r.Reason == "" {
		r.Reason = string(c.Reason)
	}
	if len(members) < whole {
		r.Reason = fmt.Sprintf("%s (%d of its %d nodes now: the disruption budget holds the rest back)", r.Reason,
			len(members), whole)
		r.SavingPerHour = c.SavingPerHour * float64(len(members)) / float64(whole)
	}
	for _, rp := range c.Replacement {
		if rp.Count > 0 {
			r.Replacements = append(r.Replacements, &replacement{Group: rp.Group, Count: rp.Count, ReadyBefore: ready[rp.Group]})
		}
	}
	st.Heals[r.Node] = r
	for _, m := range members {
		v.inFlight[m.Node] = r
		v.disrupting[m.Group]++
	}
	h.dm.decisions.WithLabelValues(string(c.Reason), ActionStarted).Inc()
	h.event(r, apiv1.EventTypeNormal, "DisruptionStarted", "Disrupting %s (%s): %s; replacement: %s",
		strings.Join(planNodes(r), ", "), r.For, r.Reason, replacementString(r))
	logger.Info("Disruption started", "replacement", replacementString(r), "savingPerHour", c.SavingPerHour)
	return true
}

// withinBudget keeps, in order, the members of a candidate without new
// capacity that their groups' budgets allow now, and counts them per group.
// Such a candidate is a removal found node after node, each node's pods
// placed on nodes that stay or whose own removal carried them on, so any
// part of it holds on its own: a set larger than a budget starts with what
// fits instead of waiting for a budget it may never get (the group shrinks
// as it goes, and its percentage with it).
func (h *Engine) withinBudget(v *view, reason Reason, members []*member, now time.Time) ([]*member, map[string]int) {
	kept := members[:0:0]
	count := map[string]int{}
	for _, m := range members {
		if count[m.Group] < h.budget.Allowed(m.Group, reason, v.groupSize[m.Group], v.disrupting[m.Group], now) {
			kept = append(kept, m)
			count[m.Group]++
		}
	}
	return kept, count
}

func planNodes(r *plan) []string {
	out := make([]string, 0, len(r.Nodes))
	for _, m := range r.Nodes {
		out = append(out, m.Node)
	}
	return out
}

func replacementString(r *plan) string {
	if len(r.Replacements) == 0 {
		return "none"
	}
	var out []string
	for _, rp := range r.Replacements {
		out = append(out, fmt.Sprintf("%d of %s", rp.Count, rp.Group))
	}
	return strings.Join(out, ", ")
}
