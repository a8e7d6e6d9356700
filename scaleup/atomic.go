package scaleup

import (
	"context"
	"errors"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/estimator"
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
