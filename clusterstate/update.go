package clusterstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Update observes the provider's node groups and the cluster's nodes at now.
func (r *Registry) Update(ctx context.Context, provider cloudprovider.CloudProvider, nodes []*apiv1.Node, now time.Time) error {
	groups, err := r.readGroups(ctx, provider)
	if err != nil {
		return err
	}
	identities := identify(ctx, provider, nodes, groups)
	cluster, mismatches := r.countNodes(ctx, provider, nodes, groups, now)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = nil
	r.holdAvoided(ctx, provider, groups, now)
	firstSeen := map[string]time.Time{}
	seenErrors := map[string]bool{}
	for id, gs := range groups {
		failure := r.countInstances(gs, identities, now, firstSeen, seenErrors)
		cluster.Unregistered += gs.Counts.Unregistered
		cluster.LongUnregistered += gs.Counts.LongUnregistered
		cluster.Failed += gs.Counts.Failed
		r.updateGroup(ctx, id, gs, failure, now)
	}
	r.firstSeen, r.seenErrors = firstSeen, seenErrors
	r.forgetGoneGroups(groups)
	r.groups, r.cluster, r.updated, r.identities = groups, cluster, now, identities
	r.draMismatches = mismatches
	r.healthy = r.acceptable(cluster.Unready+cluster.LongUnregistered, cluster.Registered()+cluster.LongUnregistered)
	return nil
}

// readGroups reads each node group's target size, options and instances
// from the provider.
func (r *Registry) readGroups(ctx context.Context, provider cloudprovider.CloudProvider) (map[string]*GroupState, error) {
	ngs, err := provider.NodeGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing node groups: %w", err)
	}
	groups := make(map[string]*GroupState, len(ngs))
	for _, ng := range ngs {
		gs := &GroupState{NodeGroup: ng, Options: r.opts.NodeGroupDefaults}
		if gs.Target, err = ng.TargetSize(ctx); err != nil {
			return nil, fmt.Errorf("reading the target size of %q: %w", ng.Id(), err)
		}
		switch o, err := ng.GetOptions(ctx, r.opts.NodeGroupDefaults); {
		case err == nil && o != nil:
			gs.Options = *o
		case err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented):
			klog.FromContext(ctx).Error(err, "Reading node group options; using the defaults", "nodeGroup", ng.Id())
		}
		if gs.Instances, err = ng.Nodes(ctx); err != nil {
			return nil, fmt.Errorf("listing the instances of %q: %w", ng.Id(), err)
		}
		groups[ng.Id()] = gs
	}
	return groups, nil
}

// identify matches the nodes with the groups' instances, by the
// provider's rule.
func identify(ctx context.Context, provider cloudprovider.CloudProvider, nodes []*apiv1.Node,
	groups map[string]*GroupState) *cloudprovider.Identities {
	listed := make(map[string][]cloudprovider.Instance, len(groups))
	for id, gs := range groups {
		listed[id] = gs.Instances
	}
	return cloudprovider.Identify(ctx, provider, nodes, listed)
}

// countNodes counts the registered nodes by readiness, in the cluster (the
// counts it returns) and in their groups, and lists each group's nodes. It
// also returns the DRA pool mismatches between the ready nodes and their
// groups' templates (DRATemplateMismatches).
func (r *Registry) countNodes(ctx context.Context, provider cloudprovider.CloudProvider, nodes []*apiv1.Node,
	groups map[string]*GroupState, now time.Time) (NodeCounts, map[DRAMismatch]int) {
	var cluster NodeCounts
	mismatches := map[DRAMismatch]int{}
	nodeGroups, members := nodeGroupsOf(ctx, provider, nodes)
	devices := newDeviceCheck(ctx, provider, r.slices, members)
	for i, n := range nodes {
		ng := nodeGroups[i]
		var gs *GroupState
		if ng != nil {
			gs = groups[ng.Id()]
		}
		c := r.countNode(ctx, devices, n, ng, gs, now)
		cluster.add(c)
		if gs != nil {
			gs.Counts.add(c)
			gs.Nodes = append(gs.Nodes, n)
		}
		if c.Ready > 0 {
			devices.templateMismatches(n.Name, gs, mismatches)
		}
	}
	return cluster, mismatches
}

// countNode counts node n of group ng (nil when none; gs its state, nil
// when none) by readiness, and lists it among its group's not started or
// resource-unready nodes when it is one. A suspended node counts as
// suspended only.
func (r *Registry) countNode(ctx context.Context, devices *deviceCheck, n *apiv1.Node, ng cloudprovider.NodeGroup,
	gs *GroupState, now time.Time) NodeCounts {
	startup := r.opts.NodeGroupDefaults.MaxNodeStartupTime
	if gs != nil {
		startup = gs.Options.MaxNodeStartupTime
	}
	var c NodeCounts
	if isBeingDeleted(n) {
		c.BeingDeleted++
	}
	if IsSuspended(n) {
		c.Suspended++
		return c
	}
	readiness, devicesLate := r.nodeReadiness(ctx, devices, n, ng, now, startup)
	if devicesLate && gs != nil {
		gs.ResourceUnreadyNodes = append(gs.ResourceUnreadyNodes, n.Name)
	}
	if devicesLate && readiness == Unready {
		c.ResourceUnready = 1
	}
	switch readiness {
	case Ready:
		c.Ready++
	case Unready:
		c.Unready++
	case NotStarted:
		c.NotStarted++
		if gs != nil {
			gs.NotStartedNodes = append(gs.NotStartedNodes, n.Name)
		}
	}
	return c
}

// countInstances counts the group's instances that have no Node: failed,
// unregistered, long unregistered. It records in firstSeen when each
// unregistered instance was first seen and in seenErrors the failed ones;
// it returns the error of a failed instance not seen failed before, if
// any (the last one listed). r.mu is held.
func (r *Registry) countInstances(gs *GroupState, identities *cloudprovider.Identities, now time.Time,
	firstSeen map[string]time.Time, seenErrors map[string]bool) *cloudprovider.InstanceErrorInfo {
	var failure *cloudprovider.InstanceErrorInfo
	for _, in := range gs.Instances {
		switch {
		case identities.Registered(in.Id):
		case in.Status != nil && in.Status.ErrorInfo != nil:
			gs.Counts.Failed++
			gs.FailedInstances = append(gs.FailedInstances, in)
			seenErrors[in.Id] = true
			if !r.seenErrors[in.Id] {
				failure = in.Status.ErrorInfo
			}
		case in.Status != nil && in.Status.State == cloudprovider.InstanceDeleting:
		default:
			r.countUnregistered(gs, in, identities, now, firstSeen)
		}
	}
	return failure
}

// countUnregistered counts instance in, which has no Node, as unregistered
// or, past the group's provision time since it was first seen, as long
// unregistered. r.mu is held.
func (r *Registry) countUnregistered(gs *GroupState, in cloudprovider.Instance, identities *cloudprovider.Identities,
	now time.Time, firstSeen map[string]time.Time) {
	seen, ok := r.firstSeen[in.Id]
	if !ok {
		seen = now
	}
	firstSeen[in.Id] = seen
	if now.Sub(seen) <= gs.Options.MaxNodeProvisionTime {
		gs.Counts.Unregistered++
		return
	}
	gs.Counts.LongUnregistered++
	u := UnregisteredInstance{Id: in.Id, Since: seen}
	if node, m := identities.NodeOf(in.Id); m == cloudprovider.MaybeMatch {
		u.Node, u.NodeWhy = node, identities.Why(node)
	}
	gs.LongUnregistered = append(gs.LongUnregistered, u)
}

// updateGroup backs group id off for a new failure of an instance, tracks
// its scale-ups, and sets its health and back-off. r.mu is held.
func (r *Registry) updateGroup(ctx context.Context, id string, gs *GroupState, failure *cloudprovider.InstanceErrorInfo,
	now time.Time) {
	if failure != nil {
		r.fail(ctx, id, BackoffReason{ErrorCode: failure.ErrorCode, ErrorMessage: failure.ErrorMessage},
			failure.ErrorClass.String(), now)
	}
	r.trackScaleUp(ctx, gs, now)
	gs.Healthy = r.acceptable(gs.Counts.Unready+gs.Counts.LongUnregistered, gs.Counts.Registered()+gs.Counts.LongUnregistered)
	gs.BackedOff, gs.BackoffReason = r.backoff.BackedOff(id, now)
	gs.BackoffUntil = r.backoff.Until(id, now)
}

// forgetGoneGroups drops the in-flight scale-ups of groups the provider no
// longer lists. r.mu is held.
func (r *Registry) forgetGoneGroups(groups map[string]*GroupState) {
	for id := range r.scaleUps {
		if groups[id] == nil {
			delete(r.scaleUps, id)
		}
	}
}
