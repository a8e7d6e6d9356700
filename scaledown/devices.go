package scaledown

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// DeviceSession is a Session that knows the DRA devices of nodes
// (*scaleup.Session is one): how many devices the ResourceSlices of a node
// publish and how many of them allocated claims hold.
type DeviceSession interface {
	DeviceUsage(node string) (allocated, total int)
}

// SliceSession is a Session that knows the ResourceSlices nodes publish
// (*scaleup.Session is one), for the DRA GPUs --gpu-total counts.
type SliceSession interface {
	ResourceSlices(node string) []*resourceapi.ResourceSlice
}

// slicesOf returns the ResourceSlices node publishes in the session (none
// when the session does not know them).
func slicesOf(s Session, node string) []*resourceapi.ResourceSlice {
	if d, knows := s.(SliceSession); knows {
		return d.ResourceSlices(node)
	}
	return nil
}

// ExplainingSession is a Session that says why a removal cannot be
// simulated (*scaleup.Session is one): nil when the pods to move all fit
// elsewhere (and the removal is kept, as with TryRemove), else the reason,
// naming the pod and, for a pod whose resource claims cannot be allocated
// anywhere else, the claims.
type ExplainingSession interface {
	TryRemoveWhy(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) error
}

// WalkingSession is a session that also says which nodes a removal's
// simulation read (*scaleup.Session does): the nodes whose Filter plugins
// ran for a moved pod and where each pod went, recorded in w (verdicts.go).
type WalkingSession interface {
	TryRemoveWalk(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool, w *framework.Walk) error
}

// ReplayingSession is a session that can put itself where a removal's
// simulation left it from the simulation's recorded destinations, without
// simulating (*scaleup.Session does; verdicts.go).
type ReplayingSession interface {
	ReplayRemoval(ctx context.Context, node string, move []*apiv1.Pod, dests []string, ok bool) error
}

// tryMove runs the session's removal simulation for node; why is the
// session's explanation when it has one.
func tryMove(ctx context.Context, s Session, node string, move []*apiv1.Pod, avoid map[string]bool) (ok bool, why string) {
	if e, explains := s.(ExplainingSession); explains {
		if err := e.TryRemoveWhy(ctx, node, move, avoid); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
	return s.TryRemove(ctx, node, move, avoid), ""
}

// deviceShare is the share of node n's DRA devices that allocated claims
// hold; ok is false when n publishes no device (or the session does not
// know devices). A session holding the loop's simulator (*scaleup.Session
// does) answers from its snapshot, where a GPU cut into partitions that
// consume shared counters (MIG through DRA) counts by the share of its
// counters in use, not by how many of its partitions are allocated; other
// sessions answer by counting devices (DeviceSession).
func deviceShare(s Session, n *apiv1.Node) (share float64, ok bool) {
	if ss, knows := s.(simulatorSession); knows && ss.Simulator() != nil {
		return ss.Simulator().Snapshot().DeviceShare(n.Name)
	}
	d, knows := s.(DeviceSession)
	if !knows {
		return 0, false
	}
	allocated, total := d.DeviceUsage(n.Name)
	if total == 0 {
		return 0, false
	}
	return float64(allocated) / float64(total), true
}

// explain copies the details of the simulation's refusals into the plan:
// a node kept because its pods cannot move or a pod blocks it (the pod and
// the drain rule or PDB), or kept since, unsimulated, as
// RecentlyUnremovable, carries the reason the simulation gave, e.g. the
// resource claim that cannot be allocated on another node. Details of nodes
// no longer kept for that are forgotten.
func (p *Planner) explain(plan *Plan) {
	for name, why := range p.blockers {
		switch plan.Unremovable[name] {
		case ReasonNoPlaceToMovePods, ReasonBlockedByPod, ReasonRecentlyUnremovable:
			if plan.Details == nil {
				plan.Details = map[string]string{}
			}
			plan.Details[name] = why
		default:
			delete(p.blockers, name)
		}
	}
}
