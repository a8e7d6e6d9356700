package scaleup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
)

// RollbackReason is the deleted_nodes_total reason of instances deleted
// when an all-or-nothing scale-up is rolled back.
const RollbackReason = "atomic-rollback"

// ErrNodeGroupGone is returned by Rollback for a node group that no longer
// exists: nothing of it can be undone, and nothing of it is left either.
var ErrNodeGroupGone = errors.New("node group is gone")

// AtomicResult is the outcome of an all-or-nothing scale-up.
type AtomicResult struct {
	// Fit is true when every pod has room: on existing or upcoming nodes,
	// or on the nodes this call added.
	Fit bool
	// Increases are the increases made (none unless Fit).
	Increases []Increase
	// Before are, by node group, the ids of the instances the provider
	// listed just before each increase: any other instance of the group is
	// newer. Most clouds list new instances only some time after the
	// increase, so the caller attributes them to the attempt as they
	// appear, up to the increase's delta.
	Before map[string][]string
	// Instances are, by node group, the new instances the provider already
	// listed right after the increase; often fewer than the delta, or none.
	Instances map[string][]string
	// Reason says why nothing was done when Fit is false.
	Reason string
	// Permanent is true when the pods could not fit even in an empty
	// cluster: every node group at its max size and the cluster limits.
	// It is never set while a node group's template is unknown (the
	// provider's template failed, or a group built from its nodes has none
	// now): that group might hold them.
	Permanent bool
	// Err is a failed increase (everything made before it was rolled back,
	// but for Left).
	Err error
	// Left is what the rollback after Err could not undo yet, by node
	// group; the caller finishes it with Rollback later.
	Left map[string]Undo
}

// Undo is what rolling back one node group's share of an all-or-nothing
// scale-up takes.
type Undo struct {
	// Instances are the ids of the share's instances that were listed:
	// they are deleted by name.
	Instances []string
	// Unlisted is how many of the instances asked for were never listed:
	// the group's target size is decreased by as many, so that the cloud
	// does not create them.
	Unlisted int
	// Request is the ProvisioningRequest (namespace/name) the instances
	// were made for: its consuming pods do not keep a node from being
	// deleted. Empty when not known: then any pod but DaemonSet and static
	// ones, and those that finished, does.
	Request string
	// Kept are, in what Rollback returns, the instances of Instances it
	// did not delete because their nodes run other pods, with why.
	Kept map[string]string
}

// Empty reports whether nothing is left to undo.
func (u Undo) Empty() bool { return len(u.Instances) == 0 && u.Unlisted <= 0 }

// String is the instances and the number never listed, and the instances
// kept, if any; for logs.
func (u Undo) String() string {
	if len(u.Kept) == 0 {
		return fmt.Sprintf("{%v %d}", u.Instances, u.Unlisted)
	}
	return fmt.Sprintf("{%v %d kept %v}", u.Instances, u.Unlisted, u.Kept)
}

// ScaleUpAll gives every pod room or changes nothing. Pods that fit existing
// or upcoming nodes take that room; for the others one node group is scaled
// when one can hold them all, otherwise several, in the expander's order of
// preference. Group max sizes and --max-nodes-total, --cores-total and
// --memory-total bound it; --max-nodes-per-scaleup does not (splitting a
// request over loops would break its atomicity), and neither does the
// binpacking time budget. The increases use AtomicIncreaseSize where the
// provider has it. When a later increase fails, the earlier ones are rolled
// back at once.
//
// record, when not nil, is called once the plan is made and before the
// first increase, with the increases to come and the instances each group
// lists before them: the caller writes down the attempt there, so that an
// autoscaler that dies during or after the increases leaves a record the
// next one can finish or roll back. When record fails nothing is increased.
func (s *Session) ScaleUpAll(ctx context.Context, pods []*apiv1.Pod, record RecordFunc) AtomicResult {
	snap := s.o.sim.Snapshot()
	snap.Fork()
	remaining := s.o.fitExisting(ctx, pods, false)
	if len(remaining) == 0 {
		snap.Commit()
		return AtomicResult{Fit: true}
	}
	podGroups := estimator.GroupPods(remaining)
	plan, reason := s.planAll(ctx, podGroups, s.totals, false)
	s.o.recordAll(remaining, plan, reason)
	if plan == nil {
		snap.Revert()
		_, why := s.planAll(ctx, podGroups, &totals{}, true)
		unknown := 0
		for _, gs := range s.groups {
			if gs.template == nil {
				unknown++
			}
		}
		if unknown > 0 {
			reason += fmt.Sprintf(" (%d node groups have no template now and are not counted)", unknown)
		}
		return AtomicResult{Reason: reason, Permanent: why != "" && unknown == 0}
	}
	planned, err := s.listBefore(ctx, plan)
	if err == nil && record != nil {
		if err = record(ctx, planned); err != nil {
			err = fmt.Errorf("recording the attempt before its increases: %w", err)
		}
	}
	if err != nil {
		snap.Revert()
		return AtomicResult{Err: err, Reason: err.Error() + "; nothing was increased"}
	}
	res := AtomicResult{Before: map[string][]string{}, Instances: map[string][]string{}}
	s.decision++
	for i, sh := range plan {
		before := planned[i].Before
		// Set before the increase: a failed one's partial effect is
		// rolled back too, and what is left of it is told from the
		// instances the group had only by this list.
		res.Before[sh.gs.group.Id()] = before
		ids, partial, err := s.increase(ctx, sh, before)
		if err != nil {
			undo := map[string]Undo{}
			for _, inc := range res.Increases {
				listed := res.Instances[inc.NodeGroup]
				undo[inc.NodeGroup] = Undo{Instances: listed, Unlisted: inc.To - inc.From - len(listed)}
			}
			if !partial.Empty() {
				// The failed increase took effect in part: undone with the rest.
				undo[sh.gs.group.Id()] = partial
			}
			left, rbErr := s.o.Rollback(ctx, undo, "a later increase of the same request failed")
			if rbErr != nil {
				klog.FromContext(ctx).Error(rbErr, "Rolling back an all-or-nothing scale-up")
				err = errors.Join(err, rbErr)
			}
			for _, inc := range res.Increases {
				s.groups[inc.NodeGroup].target = inc.From
			}
			snap.Revert()
			return AtomicResult{Err: err, Reason: err.Error(), Before: res.Before, Left: left}
		}
		gs := sh.gs
		res.Instances[gs.group.Id()] = ids
		res.Increases = append(res.Increases, Increase{NodeGroup: gs.group.Id(), From: gs.target, To: gs.target + sh.delta,
			Max: gs.group.MaxSize(), Pods: pods, Decision: s.decision})
		gs.target += sh.delta
	}
	for i, sh := range plan {
		s.o.state.RegisterScaleUp(sh.gs.group.Id(), sh.delta, s.in.Now)
		s.totals.add(sh.delta, sh.gs.template)
		s.added += sh.delta
		klog.FromContext(ctx).Info("Scaled up node group for an all-or-nothing request", "nodeGroup", sh.gs.group.Id(),
			"from", res.Increases[i].From, "to", res.Increases[i].To, "pods", len(pods))
	}
	snap.Commit()
	res.Fit = true
	return res
}

// Planned is one increase of an all-or-nothing scale-up about to be made.
type Planned struct {
	NodeGroup string
	// From and To are the group's target size before and after it.
	From, To int
	// Before are the ids of the instances the group lists before it.
	Before []string
}

// RecordFunc writes down the increases of an all-or-nothing scale-up
// before they are made; see ScaleUpAll.
type RecordFunc func(ctx context.Context, planned []Planned) error

// listBefore lists the instances of every group of the plan, before any
// increase.
func (s *Session) listBefore(ctx context.Context, plan []share) ([]Planned, error) {
	out := make([]Planned, 0, len(plan))
	for _, sh := range plan {
		ng := sh.gs.group
		listed, err := ng.Nodes(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the instances of %q: %w", ng.Id(), err)
		}
		before := make([]string, 0, len(listed))
		for _, in := range listed {
			before = append(before, in.Id)
		}
		out = append(out, Planned{NodeGroup: ng.Id(), From: sh.gs.target, To: sh.gs.target + sh.delta, Before: before})
	}
	return out, nil
}

// increase adds sh.delta instances to the group, whose instances before it
// are before. It returns the ids of the new instances listed right after it
// (a provider may list them only later). When the increase fails, partial
// is what took effect all the same and must be rolled back with the
// attempt's other increases.
func (s *Session) increase(ctx context.Context, sh share, before []string) (added []string, partial Undo, err error) {
	ng := sh.gs.group
	had := make(map[string]bool, len(before))
	for _, id := range before {
		had[id] = true
	}
	if g := s.grow(ctx, sh.gs, sh.delta, true); g.Err != nil {
		s.failed(ctx, sh.gs, g)
		err = &IncreaseError{NodeGroup: ng.Id(), Delta: sh.delta, Transient: g.Transient, Err: g.Err}
		// What took effect, or may have (the outcome of a call is unknown
		// when the target size could not be read after it), is undone:
		// an instance left out would be an orphan.
		if took := g.Added + g.Unknown; took > 0 {
			partial.Unlisted = took
			if after, lerr := ng.Nodes(ctx); lerr == nil {
				for _, in := range after {
					if !had[in.Id] && len(partial.Instances) < took {
						partial.Instances = append(partial.Instances, in.Id)
					}
				}
			}
			partial.Unlisted -= len(partial.Instances)
		}
		return nil, partial, err
	}
	after, err := ng.Nodes(ctx)
	if err != nil {
		// The increase is made: its instances are attributed when they are
		// listed in a later loop.
		klog.FromContext(ctx).Error(err, "Listing the instances of a node group after an increase", "nodeGroup", ng.Id())
		return nil, Undo{}, nil
	}
	for _, in := range after {
		if !had[in.Id] && len(added) < sh.delta {
			added = append(added, in.Id)
		}
	}
	return added, Undo{}, nil
}

// planAll finds node groups that together hold every pod of podGroups. It
// prefers one group, chosen by the expander among those that can hold all;
// failing that it fills groups in the expander's order of preference. With
// empty it ignores current sizes, back-offs and usage: the question is then
// whether the pods could ever fit. It returns nil and the reasons when not.
func (s *Session) planAll(ctx context.Context, podGroups []*estimator.Group, t *totals, empty bool) ([]share, string) {
	o := s.o
	total := 0
	for _, g := range podGroups {
		total += len(g.Pods)
	}
	type candidate struct {
		gs  *groupState
		est estimator.Estimate
	}
	// notes say, group by group in id order, why a group holds fewer than
	// all the pods: the request's condition message is made of them.
	var notes []string
	// refusedDevices counts the groups whose new node lacks the devices
	// the pods claim, by the devices ("8 devices of class X").
	refusedDevices := map[string]int{}
	var candidates []candidate
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		gs := s.groups[id]
		switch {
		case gs.template == nil && gs.skip != "":
			notes = append(notes, fmt.Sprintf("group %s is left out (%s)", id, gs.skip))
			continue
		case gs.template == nil:
			notes = append(notes, fmt.Sprintf("group %s has no template node", id))
			continue
		case !empty && gs.skip != "":
			notes = append(notes, fmt.Sprintf("group %s is left out (%s)", id, gs.skip))
			continue
		}
		room := gs.group.MaxSize() - gs.target
		if empty {
			room = gs.group.MaxSize()
		}
		if room <= 0 {
			notes = append(notes, fmt.Sprintf("group %s is at its max size of %d nodes", id, gs.group.MaxSize()))
			continue
		}
		limits := s.atomicLimits(room, t)
		if exhausted(limits) {
			notes = append(notes, fmt.Sprintf("group %s: the cluster-wide limits leave room for no node", id))
			continue
		}
		if qRoom, quota, limited := t.quotaRoom(gs.template.Node); limited {
			if qRoom <= 0 {
				notes = append(notes, fmt.Sprintf("group %s: CapacityQuota %s leaves room for no node", id, quota))
				continue
			}
			limits.MaxNodes = min(limits.MaxNodes, qRoom)
		}
		est, err := o.estimator.Estimate(ctx, podGroups, gs.template, id, limits)
		if err != nil {
			notes = append(notes, fmt.Sprintf("group %s: the estimate failed: %v", id, err))
			continue
		}
		switch {
		case est.NodeCount == 0 && est.LimitedBy == estimator.LimitNone:
			note, devices := o.newNodeRefusal(id, podGroups, est, gs.template.Node)
			notes = append(notes, note)
			if devices != "" {
				refusedDevices[devices]++
			}
		case est.NodeCount == 0:
			notes = append(notes, fmt.Sprintf("group %s holds none of the %d pods: one node would exceed %s",
				id, total, limitText(est.LimitedBy, limits, room, gs.group.MaxSize())))
		case est.LimitedBy != estimator.LimitNone:
			notes = append(notes, fmt.Sprintf("group %s holds %d of the %d pods on %s; more would exceed %s",
				id, len(est.Scheduled), total, nodesText(est.NodeCount), limitText(est.LimitedBy, limits, room, gs.group.MaxSize())))
		}
		if est.NodeCount > 0 {
			candidates = append(candidates, candidate{gs: gs, est: est})
		}
	}
	if len(candidates) == 0 {
		if len(refusedDevices) == 1 {
			for devices, n := range refusedDevices {
				if n == len(notes) {
					// Every group, for want of the same devices: in the
					// words of the NotTriggerScaleUp event.
					return nil, fmt.Sprintf("none of the %d pods fit: no node group offers %s on one node", total, devices)
				}
			}
		}
		return nil, noRoom(total, total, notes)
	}

	// One group that holds everything, if the expander has a choice.
	var whole []expander.Option
	infos := map[string]*cloudprovider.NodeInfo{}
	for _, c := range candidates {
		if len(c.est.Scheduled) == total {
			whole = append(whole, expander.Option{NodeGroup: c.gs.group, NodeCount: c.est.NodeCount, Pods: c.est.Scheduled})
			infos[c.gs.group.Id()] = c.gs.template
		}
	}
	if len(whole) > 0 {
		if best := o.chain.BestOption(ctx, whole, infos); best != nil {
			return []share{{gs: s.groups[best.NodeGroup.Id()], delta: best.NodeCount}}, ""
		}
	}

	// Several groups, most preferred first.
	options := make([]expander.Option, 0, len(candidates))
	for _, c := range candidates {
		options = append(options, expander.Option{NodeGroup: c.gs.group, NodeCount: c.est.NodeCount, Pods: c.est.Scheduled})
		infos[c.gs.group.Id()] = c.gs.template
	}
	var plan []share
	left := podGroups
	used := t.clone()
	for len(left) > 0 && len(options) > 0 {
		best := o.chain.BestOption(ctx, options, infos)
		if best == nil {
			break
		}
		options = removeOption(options, best.NodeGroup.Id())
		gs := s.groups[best.NodeGroup.Id()]
		room := gs.group.MaxSize() - gs.target
		if empty {
			room = gs.group.MaxSize()
		}
		limits := s.atomicLimits(room, used)
		if exhausted(limits) {
			notes = append(notes, "the cluster-wide limits leave room for no more nodes")
			break
		}
		if qRoom, quota, limited := used.quotaRoom(gs.template.Node); limited {
			if qRoom <= 0 {
				notes = append(notes, fmt.Sprintf("group %s: CapacityQuota %s leaves room for no more nodes", gs.group.Id(), quota))
				continue
			}
			limits.MaxNodes = min(limits.MaxNodes, qRoom)
		}
		est, err := o.estimator.Estimate(ctx, left, gs.template, gs.group.Id(), limits)
		if err != nil || est.NodeCount == 0 {
			continue
		}
		plan = append(plan, share{gs: gs, delta: est.NodeCount})
		used.add(est.NodeCount, gs.template)
		left = without(left, est.Scheduled)
	}
	if len(left) > 0 {
		missing := 0
		for _, g := range left {
			missing += len(g.Pods)
		}
		return nil, noRoom(missing, total, notes)
	}
	return plan, ""
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
