package processors

import (
	"context"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// Loop is what one loop observed, as every processor sees it. It is read
// once per loop; processors must not modify it or the objects it holds.
type Loop struct {
	Now        time.Time
	NodeGroups []cloudprovider.NodeGroup
	Nodes      []*apiv1.Node
	// ScheduledPods are the pods bound to a node, not terminal.
	ScheduledPods []*apiv1.Pod
	// PendingPods are every pod not bound to a node and not terminal,
	// whether or not the scheduler has tried it yet.
	PendingPods []*apiv1.Pod
}

// PodListProcessor is one step of the list of pending pods that reach the
// scale-up. The first processor of the list receives Loop.PendingPods;
// each returns the pods the next one receives. It may drop pods, set them
// aside or add stand-ins for pods to come; it must not modify the pods it
// receives (they are the informer cache's) and should not reorder them.
type PodListProcessor interface {
	ProcessPods(ctx context.Context, loop *Loop, pods []*apiv1.Pod) []*apiv1.Pod
}

// NodeGroupListProcessor names node groups the scale-up must not grow in
// this loop, with a reason each (shown in NotTriggerScaleUp events and in
// the logs), given the groups no earlier processor excluded. clusterstate's
// verdicts (unhealthy, backed off) apply whatever the processors say.
type NodeGroupListProcessor interface {
	ExcludeNodeGroups(ctx context.Context, loop *Loop, groups []cloudprovider.NodeGroup) map[string]string
}

// CapacityProcessor works in the loop's scale-up session before the
// ordinary pending pods: what it places or scales up there, the ordinary
// scale-up does not see as free. It runs in every loop whose pod lists
// ran and where it or the pod lists have work.
type CapacityProcessor interface {
	// HasWork reports whether the processor needs the session in this loop
	// even when no ordinary pod is pending. It is asked after the pod lists.
	HasWork() bool
	// ProcessCapacity does the work, and reports whether it changed the
	// cluster in a way the next loop should look at at once.
	ProcessCapacity(ctx context.Context, loop *Loop, session *scaleup.Session) bool
}

// ScaleUpStatus is what the scale-up step did in one loop.
type ScaleUpStatus struct {
	// Pods are the pending pods the pod lists passed to the ordinary
	// scale-up; empty when none did.
	Pods []*apiv1.Pod
	// Result is the ordinary scale-up's; zero when it did not run.
	Result scaleup.Result
	// Added is the number of nodes added by the step, capacity processors'
	// scale-ups included.
	Added int
	// Session is the loop's scale-up session, as the scale-up left it (the
	// pods it placed on existing and upcoming nodes); nil when none began.
	// Read it only: the scale-down goes on with it.
	Session *scaleup.Session
}

// ScaleUpStatusProcessor is told what the scale-up step did, in every loop
// in which the pod lists ran, whatever the outcome: a processor that held
// per-loop state since the pod lists settles it here.
type ScaleUpStatusProcessor interface {
	ScaleUpDone(ctx context.Context, loop *Loop, status ScaleUpStatus)
}

// ScaleDownStatus is what the scale-down step did in one loop.
type ScaleDownStatus struct {
	// RemovalsStarted counts the nodes whose removal (drain and delete)
	// started in this loop.
	RemovalsStarted int
}

// ScaleDownStatusProcessor is told what the scale-down step did, in every
// loop in which it ran.
type ScaleDownStatusProcessor interface {
	ScaleDownDone(ctx context.Context, loop *Loop, status ScaleDownStatus)
}

// RepairProcessor acts on broken capacity after cleanup and before the
// scale-up, in a healthy cluster only. It reports whether it changed the
// cluster; if any did, the loop ends there and the next one decides on a
// fresh observation.
type RepairProcessor interface {
	Repair(ctx context.Context, loop *Loop) bool
}

// TemplateProcessor adjusts a node group's template in the scale-up
// session; see scaleup.TemplateProcessor.
type TemplateProcessor = scaleup.TemplateProcessor

// Set is the loop's processors, step by step, each list in the order its
// processors run. The zero Set runs nothing: every pending pod reaches the
// scale-up.
type Set struct {
	Repairs         []RepairProcessor
	PodLists        []PodListProcessor
	NodeGroups      []NodeGroupListProcessor
	Capacity        []CapacityProcessor
	ScaleUpStatus   []ScaleUpStatusProcessor
	ScaleDownStatus []ScaleDownStatusProcessor
}

// Repair runs the repair processors in order; it stops at the first one
// that changed the cluster and reports whether one did.
func (s Set) Repair(ctx context.Context, loop *Loop) bool {
	for _, p := range s.Repairs {
		if p.Repair(ctx, loop) {
			return true
		}
	}
	return false
}

// Pods runs the pod-list processors in order, starting from the loop's
// pending pods.
func (s Set) Pods(ctx context.Context, loop *Loop) []*apiv1.Pod {
	pods := loop.PendingPods
	for _, p := range s.PodLists {
		pods = p.ProcessPods(ctx, loop, pods)
	}
	return pods
}

// ExcludedNodeGroups runs the node-group-list processors in order and
// returns the groups they excluded, by id, with the first reason given.
func (s Set) ExcludedNodeGroups(ctx context.Context, loop *Loop) map[string]string {
	if len(s.NodeGroups) == 0 {
		return nil
	}
	excluded := map[string]string{}
	groups := loop.NodeGroups
	for _, p := range s.NodeGroups {
		out := p.ExcludeNodeGroups(ctx, loop, groups)
		if len(out) == 0 {
			continue
		}
		kept := groups[:0:0]
		for _, g := range groups {
			reason, ok := out[g.Id()]
			if !ok {
				kept = append(kept, g)
				continue
			}
			if reason == "" {
				reason = "excluded by a node group processor"
			}
			excluded[g.Id()] = reason
			klog.FromContext(ctx).V(4).Info("Node group excluded from scale-up", "nodeGroup", g.Id(), "reason", reason)
		}
		groups = kept
	}
	return excluded
}

// HasCapacityWork reports whether a capacity processor needs the session.
func (s Set) HasCapacityWork() bool {
	for _, p := range s.Capacity {
		if p.HasWork() {
			return true
		}
	}
	return false
}

// ProcessCapacity runs the capacity processors in order in session and
// reports whether any changed the cluster.
func (s Set) ProcessCapacity(ctx context.Context, loop *Loop, session *scaleup.Session) bool {
	changed := false
	for _, p := range s.Capacity {
		if p.ProcessCapacity(ctx, loop, session) {
			changed = true
		}
	}
	return changed
}

// ScaleUpDone tells the scale-up status processors, in order.
func (s Set) ScaleUpDone(ctx context.Context, loop *Loop, status ScaleUpStatus) {
	for _, p := range s.ScaleUpStatus {
		p.ScaleUpDone(ctx, loop, status)
	}
}

// ScaleDownDone tells the scale-down status processors, in order.
func (s Set) ScaleDownDone(ctx context.Context, loop *Loop, status ScaleDownStatus) {
	for _, p := range s.ScaleDownStatus {
		p.ScaleDownDone(ctx, loop, status)
	}
}
