package scaleup

import (
	"context"
	"errors"
	"fmt"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
)

// RollbackReason is the deleted_nodes_total reason of instances deleted
// when an all-or-nothing scale-up is rolled back.
const RollbackReason = "atomic-rollback"

// AtomicResult is the outcome of an all-or-nothing scale-up.
type AtomicResult struct {
	// Fit is true when every pod has room: on existing or upcoming nodes,
	// or on the nodes this call added.
	Fit bool
	// Increases are the increases made (none unless Fit).
	Increases []Increase
	// Instances are the ids of the instances each increase created, by
	// node group, so that the caller can watch them and roll them back.
	Instances map[string][]string
	// Reason says why nothing was done when Fit is false.
	Reason string
	// Permanent is true when the pods could not fit even in an empty
	// cluster: every node group at its max size and the cluster limits.
	Permanent bool
	// Err is a failed increase (everything made before it was rolled back).
	Err error
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
func (s *Session) ScaleUpAll(ctx context.Context, pods []*apiv1.Pod) AtomicResult {
	snap := s.o.sim.Snapshot()
	snap.Fork()
	remaining := s.o.fitExisting(ctx, pods, false)
	if len(remaining) == 0 {
		snap.Commit()
		return AtomicResult{Fit: true}
	}
	podGroups := estimator.GroupPods(remaining)
	plan, reason := s.planAll(ctx, podGroups, s.totals, false)
	if plan == nil {
		snap.Revert()
		_, why := s.planAll(ctx, podGroups, &totals{}, true)
		return AtomicResult{Reason: reason, Permanent: why != ""}
	}
	res := AtomicResult{Instances: map[string][]string{}}
	s.decision++
	for _, sh := range plan {
		ids, err := s.increase(ctx, sh)
		if err != nil {
			if rbErr := s.o.rollback(ctx, res.Instances, "a later increase of the same request failed"); rbErr != nil {
				klog.FromContext(ctx).Error(rbErr, "Rolling back an all-or-nothing scale-up")
				err = errors.Join(err, rbErr)
			}
			for _, inc := range res.Increases {
				s.groups[inc.NodeGroup].target = inc.From
			}
			snap.Revert()
			return AtomicResult{Err: err, Reason: err.Error()}
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

// increase adds sh.delta instances to the group and returns the ids of the
// new ones.
func (s *Session) increase(ctx context.Context, sh share) ([]string, error) {
	ng := sh.gs.group
	before, err := ng.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the instances of %q: %w", ng.Id(), err)
	}
	err = ng.AtomicIncreaseSize(ctx, sh.delta)
	if errors.Is(err, cloudprovider.ErrNotImplemented) {
		err = ng.IncreaseSize(ctx, sh.delta)
	}
	if err != nil {
		s.o.state.RegisterFailedScaleUp(ctx, ng.Id(), clusterstate.BackoffReason{ErrorCode: "cloudProviderError",
			ErrorMessage: err.Error()}, s.in.Now)
		sh.gs.skip = "scale-up execution failed"
		return nil, fmt.Errorf("increasing node group %q by %d: %w", ng.Id(), sh.delta, err)
	}
	after, err := ng.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the instances of %q: %w", ng.Id(), err)
	}
	had := make(map[string]bool, len(before))
	for _, in := range before {
		had[in.Id] = true
	}
	var ids []string
	for _, in := range after {
		if !had[in.Id] {
			ids = append(ids, in.Id)
		}
	}
	return ids, nil
}

// Rollback deletes, by name, the instances an all-or-nothing scale-up
// created, and shrinks the groups by those not created yet. It is used when
// the attempt failed or timed out, and reports what it could not undo.
func (o *Orchestrator) Rollback(ctx context.Context, instances map[string][]string, why string) error {
	return o.rollback(ctx, instances, why)
}

func (o *Orchestrator) rollback(ctx context.Context, instances map[string][]string, why string) error {
	logger := klog.FromContext(ctx)
	ngs, err := o.provider.NodeGroups(ctx)
	if err != nil {
		return fmt.Errorf("listing node groups: %w", err)
	}
	byID := map[string]cloudprovider.NodeGroup{}
	for _, ng := range ngs {
		byID[ng.Id()] = ng
	}
	var errs []error
	ids := make([]string, 0, len(instances))
	for id := range instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ng := byID[id]
		if ng == nil {
			errs = append(errs, fmt.Errorf("node group %q is gone; its instances %v could not be rolled back", id, instances[id]))
			continue
		}
		current, err := ng.Nodes(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the instances of %q: %w", id, err))
			continue
		}
		exists := map[string]bool{}
		for _, in := range current {
			exists[in.Id] = true
		}
		var victims []*apiv1.Node
		for _, instance := range instances[id] {
			if exists[instance] {
				victims = append(victims, cloudprovider.InstanceNode(instance))
			}
		}
		if len(victims) > 0 {
			err := ng.ForceDeleteNodes(ctx, victims)
			if errors.Is(err, cloudprovider.ErrNotImplemented) {
				err = ng.DeleteNodes(ctx, victims)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("deleting %d instances of %q: %w", len(victims), id, err))
				continue
			}
		}
		for _, v := range victims {
			logger.Info("Deleted instance of a rolled back all-or-nothing scale-up", "instance", v.Spec.ProviderID,
				"nodeGroup", id, "reason", why)
		}
		if o.countDeletions != nil && len(victims) > 0 {
			o.countDeletions(RollbackReason, len(victims))
		}
	}
	return errors.Join(errs...)
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
	reasons := map[string]int{}
	var candidates []candidate
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		gs := s.groups[id]
		if gs.template == nil || (!empty && gs.skip != "") {
			reason := gs.skip
			if reason == "" {
				reason = "no template node"
			}
			reasons[reason]++
			continue
		}
		room := gs.group.MaxSize() - gs.target
		if empty {
			room = gs.group.MaxSize()
		}
		if room <= 0 {
			reasons["max node group size reached"]++
			continue
		}
		limits := s.atomicLimits(room, t)
		if exhausted(limits) {
			reasons["cluster limits reached"]++
			continue
		}
		est, err := o.estimator.Estimate(ctx, podGroups, gs.template, id, limits)
		if err != nil {
			reasons[fmt.Sprintf("estimate failed: %v", err)]++
			continue
		}
		if est.LimitedBy != estimator.LimitNone {
			reasons[fmt.Sprintf("limited by %s", est.LimitedBy)]++
		}
		if est.NodeCount == 0 {
			if est.LimitedBy == estimator.LimitNone {
				reasons["it wouldn't fit if a new node is added"]++
			}
			continue
		}
		candidates = append(candidates, candidate{gs: gs, est: est})
	}
	if len(candidates) == 0 {
		return nil, summarise(reasons)
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
	used := *t
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
		limits := s.atomicLimits(room, &used)
		if exhausted(limits) {
			reasons["cluster limits reached"]++
			break
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
		reasons[fmt.Sprintf("%d of %d pods have no room in any node group", missing, total)]++
		return nil, summarise(reasons)
	}
	return plan, ""
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
