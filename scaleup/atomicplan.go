package scaleup

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
)

// planAll finds node groups that together hold every pod of podGroups. It
// prefers one group, chosen by the expander among those that can hold all;
// failing that it fills groups in the expander's order of preference. With
// empty it ignores current sizes, back-offs and usage: the question is then
// whether the pods could ever fit. It returns nil and the reasons when not.
func (s *Session) planAll(ctx context.Context, podGroups []*estimator.Group, t *totals, empty bool) ([]share, string) {
	total := podCount(podGroups)
	candidates, notes, refusedDevices := s.allCandidates(ctx, podGroups, t, empty, total)
	if len(candidates) == 0 {
		return nil, noCandidate(total, notes, refusedDevices)
	}
	if plan := s.planWhole(ctx, candidates, total); plan != nil {
		return plan, ""
	}
	return s.planSeveral(ctx, podGroups, candidates, t, empty, total, notes)
}

// allCandidate is a node group that holds some of the pods of an
// all-or-nothing request, with the estimate that says which.
type allCandidate struct {
	gs  *groupState
	est estimator.Estimate
}

// allCandidates estimates, group by group in id order, how many of the
// pods each group holds. Besides the groups that hold some, it returns
// notes saying why a group holds fewer than all the pods (the request's
// condition message is made of them), and refusedDevices, which counts the
// groups whose new node lacks the devices the pods claim, by the devices
// ("8 devices of class X").
func (s *Session) allCandidates(ctx context.Context, podGroups []*estimator.Group, t *totals, empty bool,
	total int) (candidates []allCandidate, notes []string, refusedDevices map[string]int) {
	refusedDevices = map[string]int{}
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c, note, devices := s.allCandidateOf(ctx, id, podGroups, t, empty, total)
		if note != "" {
			notes = append(notes, note)
		}
		if devices != "" {
			refusedDevices[devices]++
		}
		if c.est.NodeCount > 0 {
			candidates = append(candidates, c)
		}
	}
	return candidates, notes, refusedDevices
}

// allCandidateOf estimates group id for the pods: the candidate holds some
// when its estimate has nodes. note says why the group holds fewer than all
// the pods ("" when it holds all); devices is what the pods claim when the
// group's new node lacks those devices.
func (s *Session) allCandidateOf(ctx context.Context, id string, podGroups []*estimator.Group, t *totals, empty bool,
	total int) (c allCandidate, note, devices string) {
	gs := s.groups[id]
	limits, room, note := s.allLimits(id, gs, t, empty)
	if note != "" {
		return allCandidate{}, note, ""
	}
	est, err := s.o.estimator.Estimate(ctx, podGroups, gs.template, id, limits)
	if err != nil {
		return allCandidate{}, fmt.Sprintf("group %s: the estimate failed: %v", id, err), ""
	}
	c = allCandidate{gs: gs, est: est}
	switch {
	case est.NodeCount == 0 && est.LimitedBy == estimator.LimitNone:
		note, devices = s.o.newNodeRefusal(id, podGroups, est, gs.template.Node)
		return c, note, devices
	case est.NodeCount == 0:
		return c, fmt.Sprintf("group %s holds none of the %d pods: one node would exceed %s",
			id, total, limitText(est.LimitedBy, limits, room, gs.group.MaxSize())), ""
	case est.LimitedBy != estimator.LimitNone:
		return c, fmt.Sprintf("group %s holds %d of the %d pods on %s; more would exceed %s",
			id, len(est.Scheduled), total, nodesText(est.NodeCount), limitText(est.LimitedBy, limits, room, gs.group.MaxSize())), ""
	}
	return c, "", ""
}

// allLimits are the estimator limits of group id (gs) in the first pass of
// planAll, and its room; note says why the group is left out, if it is.
func (s *Session) allLimits(id string, gs *groupState, t *totals, empty bool) (estimator.Limits, int, string) {
	switch {
	case gs.template == nil && gs.skip != "":
		return estimator.Limits{}, 0, fmt.Sprintf("group %s is left out (%s)", id, gs.skip)
	case gs.template == nil:
		return estimator.Limits{}, 0, fmt.Sprintf("group %s has no template node", id)
	case !empty && gs.skip != "":
		return estimator.Limits{}, 0, fmt.Sprintf("group %s is left out (%s)", id, gs.skip)
	}
	room := allRoom(gs, empty)
	if room <= 0 {
		return estimator.Limits{}, 0, fmt.Sprintf("group %s is at its max size of %d nodes", id, gs.group.MaxSize())
	}
	limits := s.atomicLimits(room, t)
	if exhausted(limits) {
		return estimator.Limits{}, 0, fmt.Sprintf("group %s: the cluster-wide limits leave room for no node", id)
	}
	if qRoom, quota, limited := t.quotaRoom(gs.template.Node); limited {
		if qRoom <= 0 {
			return estimator.Limits{}, 0, fmt.Sprintf("group %s: CapacityQuota %s leaves room for no node", id, quota)
		}
		limits.MaxNodes = min(limits.MaxNodes, qRoom)
	}
	return limits, room, ""
}

// allRoom is how many nodes gs may add: up to its max size, from its
// target, or from zero when empty.
func allRoom(gs *groupState, empty bool) int {
	if empty {
		return gs.group.MaxSize()
	}
	return gs.group.MaxSize() - gs.target
}

// noCandidate says why no group holds any of the pods: when every group
// lacks the same devices, in the words of the NotTriggerScaleUp event;
// otherwise group by group.
func noCandidate(total int, notes []string, refusedDevices map[string]int) string {
	if len(refusedDevices) == 1 {
		for devices, n := range refusedDevices {
			if n == len(notes) {
				return fmt.Sprintf("none of the %d pods fit: no node group offers %s on one node", total, devices)
			}
		}
	}
	return noRoom(total, total, notes)
}

// planWhole is the one group that holds every pod, chosen by the expander
// among the candidates that do; nil when none does or the expander chose
// none.
func (s *Session) planWhole(ctx context.Context, candidates []allCandidate, total int) []share {
	whole, infos := candidateOptions(candidates, total, true)
	if len(whole) == 0 {
		return nil
	}
	if best := s.o.chain.BestOption(ctx, whole, infos); best != nil {
		return []share{{gs: s.groups[best.NodeGroup.Id()], delta: best.NodeCount}}
	}
	return nil
}

// planSeveral fills the candidates in the expander's order of preference,
// each with the pods the groups before it left, within the limits that the
// groups before it leave. notes are the first pass's; it returns the plan,
// or nil and the reasons when pods are left without room.
func (s *Session) planSeveral(ctx context.Context, podGroups []*estimator.Group, candidates []allCandidate, t *totals,
	empty bool, total int, notes []string) ([]share, string) {
	options, infos := candidateOptions(candidates, total, false)
	var plan []share
	left := podGroups
	used := t.clone()
	for len(left) > 0 && len(options) > 0 {
		best := s.o.chain.BestOption(ctx, options, infos)
		if best == nil {
			break
		}
		options = removeOption(options, best.NodeGroup.Id())
		gs := s.groups[best.NodeGroup.Id()]
		limits, note, stop := s.severalLimits(gs, used, empty)
		if note != "" {
			notes = append(notes, note)
		}
		if stop {
			break
		}
		if note != "" {
			continue
		}
		est, err := s.o.estimator.Estimate(ctx, left, gs.template, gs.group.Id(), limits)
		if err != nil || est.NodeCount == 0 {
			continue
		}
		plan = append(plan, share{gs: gs, delta: est.NodeCount})
		used.add(est.NodeCount, gs.template)
		left = without(left, est.Scheduled)
	}
	if len(left) > 0 {
		return nil, noRoom(podCount(left), total, notes)
	}
	return plan, ""
}

// severalLimits are the estimator limits of gs in planSeveral, given what
// the plan already uses. note says why gs takes no pods; stop, that no
// later group would take any either.
func (s *Session) severalLimits(gs *groupState, used *totals, empty bool) (limits estimator.Limits, note string, stop bool) {
	limits = s.atomicLimits(allRoom(gs, empty), used)
	if exhausted(limits) {
		return limits, "the cluster-wide limits leave room for no more nodes", true
	}
	if qRoom, quota, limited := used.quotaRoom(gs.template.Node); limited {
		if qRoom <= 0 {
			return limits, fmt.Sprintf("group %s: CapacityQuota %s leaves room for no more nodes", gs.group.Id(), quota), false
		}
		limits.MaxNodes = min(limits.MaxNodes, qRoom)
	}
	return limits, "", false
}

// candidateOptions are the expander options of the candidates, only those
// that hold all total pods when whole, with their template nodes.
func candidateOptions(candidates []allCandidate, total int, whole bool) ([]expander.Option,
	map[string]*cloudprovider.NodeInfo) {
	options := make([]expander.Option, 0, len(candidates))
	infos := map[string]*cloudprovider.NodeInfo{}
	for _, c := range candidates {
		if whole && len(c.est.Scheduled) != total {
			continue
		}
		options = append(options, expander.Option{NodeGroup: c.gs.group, NodeCount: c.est.NodeCount, Pods: c.est.Scheduled})
		infos[c.gs.group.Id()] = c.gs.template
	}
	return options, infos
}

// podCount counts the pods of groups.
func podCount(groups []*estimator.Group) int {
	n := 0
	for _, g := range groups {
		n += len(g.Pods)
	}
	return n
}

// newNodeRefusal words the note of group id whose new node holds none of
// podGroups' pods: the first refusal est met, as the NotTriggerScaleUp
// event words it. devices is what the pods claim ("8 devices of class X")
// when the node's devices are the refusal, "" otherwise.
func (o *Orchestrator) newNodeRefusal(id string, podGroups []*estimator.Group, est estimator.Estimate,
	template *apiv1.Node) (note, devices string) {
	for _, g := range podGroups {
		for _, p := range g.Pods {
			err, ok := est.Unschedulable[p]
			if !ok {
				continue
			}
			reason := strings.Join(deviceReasons(o.sim.Snapshot().DeviceDemands, err, p, template), ", ")
			if d, ok := strings.CutPrefix(reason, reasonNoDevices); ok {
				return fmt.Sprintf("group %s: a new node of it does not offer %s", id, d), d
			}
			return bounded(fmt.Sprintf("group %s: the pods do not fit on a new node of it (%s)", id, reason)), ""
		}
	}
	return fmt.Sprintf("group %s: the pods do not fit on a new node of it", id), ""
}

// noRoom is the sentence that says how many of a request's pods have no
// room, and why, group by group.
func noRoom(missing, total int, notes []string) string {
	head := fmt.Sprintf("%d of %d pods fit; %d have no room", total-missing, total, missing)
	if missing == total {
		head = fmt.Sprintf("none of the %d pods fit", total)
	}
	if len(notes) == 0 {
		return head + ": no node group can take them"
	}
	if len(notes) > maxNotes {
		// The message of a condition and an event: bounded, however
		// many groups there are.
		return fmt.Sprintf("%s: %s; and %d more node groups", head, strings.Join(notes[:maxNotes], "; "), len(notes)-maxNotes)
	}
	return head + ": " + strings.Join(notes, "; ")
}

// maxNotes is how many node groups' notes a noRoom sentence names.
const maxNotes = 10

// limitText names the limit an estimate hit, with its numbers. room is
// how many nodes the group could still add, max its max size.
func limitText(l estimator.Limit, limits estimator.Limits, room, max int) string {
	switch {
	case l == estimator.LimitMaxNodes && limits.MaxNodes == room && room == max:
		return fmt.Sprintf("its max size of %s", nodesText(max))
	case l == estimator.LimitMaxNodes && limits.MaxNodes == room:
		return fmt.Sprintf("the %s its max size of %d leaves room for", nodesText(room), max)
	case l == estimator.LimitMaxNodes:
		return fmt.Sprintf("the %s --max-nodes-total leaves room for", nodesText(limits.MaxNodes))
	case l == estimator.LimitCPU:
		return "the cluster's CPU limit (--cores-total)"
	case l == estimator.LimitMemory:
		return "the cluster's memory limit (--memory-total)"
	case l == estimator.LimitTime:
		return "the time an estimate may take"
	}
	return string(l)
}

func nodesText(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// atomicLimits are the estimator limits of an all-or-nothing scale-up: the
// group's room and the cluster limits, without --max-nodes-per-scaleup or
// a time budget.
func (s *Session) atomicLimits(room int, t *totals) estimator.Limits {
	o := s.o.opts
	return estimator.Limits{
		MaxNodes:       min(room, t.nodeRoom(o.MaxNodesTotal)),
		MaxMilliCPU:    t.cpuRoom(o.Cores.Max),
		MaxMemoryBytes: t.memoryRoom(o.MemoryGiB.Max),
	}
}

func removeOption(options []expander.Option, id string) []expander.Option {
	out := options[:0:0]
	for _, opt := range options {
		if opt.NodeGroup.Id() != id {
			out = append(out, opt)
		}
	}
	return out
}
