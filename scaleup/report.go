package scaleup

import (
	"context"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
)

// Reporter receives what scale-ups do and how long their steps take, for
// metrics and the cluster-level events on the status ConfigMap. It is
// optional (WithReporter); core.Reporting implements it.
type Reporter interface {
	// ScaleUpStarting is called before a group's size is increased from
	// from to to.
	ScaleUpStarting(ctx context.Context, group cloudprovider.NodeGroup, from, to int)
	// ScaledUp is called when a group's target grew from from to to;
	// template is the group's template node with the ResourceSlices its
	// nodes publish (nil when unknown).
	ScaledUp(ctx context.Context, group cloudprovider.NodeGroup, template *cloudprovider.NodeInfo, from, to int)
	// ScaleUpFailed is called when an increase of nodes instances did not
	// (all) take effect; transient says the group was not backed off.
	ScaleUpFailed(ctx context.Context, group cloudprovider.NodeGroup, template *cloudprovider.NodeInfo, nodes int, transient bool, err error)
	// SkippedScaleUp is called when a group is not considered because a
	// node of it would exceed --cores-total (metrics.CPUResourceLimit) or
	// --memory-total (metrics.MemoryResourceLimit).
	SkippedScaleUp(reason string)
	// MaxNodesTotalReached is called when pods wait and --max-nodes-total
	// leaves no room.
	MaxNodesTotalReached(ctx context.Context, maxNodes int)
	// Binpacking is called for each estimate of groups pod equivalence
	// groups from namespaces namespaces on template.
	Binpacking(template *apiv1.Node, namespaces, groups int)
	// UpdateDuration records how long a step (metrics.Function*) took.
	UpdateDuration(function string, d time.Duration)
	// OverflowingControllers is called with the number of controllers
	// whose pending pods form more than maxGroupsPerController equivalence
	// groups (upstream's overflowing controllers).
	OverflowingControllers(n int)
	// SkippedPods is called by each scale-up with the number of pending
	// pods it skipped (EnableGracefulDegradation), 0 included.
	SkippedPods(ctx context.Context, n int)
}

// WithReporter reports the scale-ups' actions and step durations to r.
func WithReporter(r Reporter) Option { return func(o *Orchestrator) { o.report = r } }

type nopReporter struct{}

func (nopReporter) ScaleUpStarting(context.Context, cloudprovider.NodeGroup, int, int) {}
func (nopReporter) ScaledUp(context.Context, cloudprovider.NodeGroup, *cloudprovider.NodeInfo, int, int) {
}
func (nopReporter) ScaleUpFailed(context.Context, cloudprovider.NodeGroup, *cloudprovider.NodeInfo, int, bool, error) {
}
func (nopReporter) SkippedScaleUp(string)                     {}
func (nopReporter) MaxNodesTotalReached(context.Context, int) {}
func (nopReporter) Binpacking(*apiv1.Node, int, int)          {}
func (nopReporter) UpdateDuration(string, time.Duration)      {}
func (nopReporter) OverflowingControllers(int)                {}
func (nopReporter) SkippedPods(context.Context, int)          {}

// NoPending tells the reporter that this loop had no pending pod to scale
// up for, so none was skipped (skipped_pods_count, graceful degradation
// over).
func (s *Session) NoPending(ctx context.Context) { s.o.report.SkippedPods(ctx, 0) }

// grow is grow for gs, reported: the increase about to be made, what took
// effect and what failed.
func (s *Session) grow(ctx context.Context, gs *groupState, delta int, atomic bool) growth {
	r := s.o.report
	r.ScaleUpStarting(ctx, gs.group, gs.target, gs.target+delta)
	g := grow(ctx, gs.group, delta, atomic)
	if g.Added > 0 {
		r.ScaledUp(ctx, gs.group, gs.template, gs.target, gs.target+g.Added)
	}
	if g.Err != nil {
		r.ScaleUpFailed(ctx, gs.group, gs.template, delta-g.Added, g.Transient, g.Err)
	}
	return g
}

// timed records how long f took as function.
func (o *Orchestrator) timed(function string, f func()) {
	start := o.clock.Now()
	f()
	o.report.UpdateDuration(function, o.clock.Since(start))
}

// namespaces counts the namespaces of the groups' pods.
func namespaces(groups []*estimator.Group) int {
	seen := map[string]bool{}
	for _, g := range groups {
		for _, p := range g.Pods {
			seen[p.Namespace] = true
		}
	}
	return len(seen)
}

// maxGroupsPerController is upstream's limit of equivalence groups per
// controller beyond which it calls the controller overflowing (it then stops
// grouping that controller's pods; grouping here costs nothing per group, so
// the pods stay grouped and the controllers are only counted).
const maxGroupsPerController = 10

// overflowing counts the controllers with more than maxGroupsPerController
// of the groups.
func overflowing(groups []*estimator.Group) int {
	perOwner := map[types.UID]int{}
	for _, g := range groups {
		if ref := metav1.GetControllerOf(g.Pods[0]); ref != nil {
			perOwner[ref.UID]++
		}
	}
	n := 0
	for _, c := range perOwner {
		if c > maxGroupsPerController {
			n++
		}
	}
	return n
}
