package core

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// The steps of RunOnce, in the order it calls them (the observation, the
// cluster state update and the scale-up are in autoscaler.go).

// observeCluster refreshes the provider, reads the loop's observation and
// hands it to a /snapshotz request that waits for one.
func (a *Autoscaler) observeCluster(ctx context.Context, now time.Time) (*Observation, error) {
	if err := a.refreshCloud(ctx); err != nil {
		return nil, err
	}
	obs, err := a.observe(ctx, now)
	if err != nil {
		return nil, err
	}
	if a.snapshots.wanted() {
		a.snapshots.deliver(a.snapshot(ctx, obs, now))
	}
	return obs, nil
}

// stopBeforeScaling runs the steps that may end the loop before its
// scale-up, in order: no ready node, cleanup, cluster health, repairs. It
// tells whether the loop stops, with the loop's result when it does.
func (a *Autoscaler) stopBeforeScaling(ctx context.Context, obs *Observation) (Result, bool) {
	if a.noReadyNodes(ctx, obs.Now) {
		a.loopStopped(obs, "the cluster has no ready node and --scale-up-from-zero=false")
		return Result{}, true
	}
	if a.cleanupChanged(ctx, obs) {
		return Result{Productive: true}, true
	}
	if a.clusterUnhealthy(ctx, obs) {
		return Result{}, true
	}
	if a.repaired(ctx, obs) {
		return Result{Productive: true}, true
	}
	return Result{}, false
}

// cleanupChanged deletes clearly broken instances and fixes drifted group
// sizes, within the cleaner's caps. It runs even in an unhealthy cluster;
// when it changed something, the next loop decides on a fresh observation.
func (a *Autoscaler) cleanupChanged(ctx context.Context, obs *Observation) bool {
	if a.cleaner == nil {
		return false
	}
	res := a.cleaner.Run(ctx, a.state, obs.Now)
	if !res.Changed() {
		return false
	}
	klog.FromContext(ctx).V(2).Info("Cleanup changed the cluster; deciding in the next loop", "deleted", res.Deleted,
		"resized", res.Resized)
	a.loopStopped(obs, fmt.Sprintf("cleanup deleted %d broken instance(s) and fixed %d group size(s); the next loop decides",
		res.Deleted, res.Resized))
	return true
}

// clusterUnhealthy stops the loop when too many nodes are unready
// (--ok-total-unready-count, --max-total-unready-percentage), with a
// ClusterUnhealthy event.
func (a *Autoscaler) clusterUnhealthy(ctx context.Context, obs *Observation) bool {
	if a.state.ClusterHealthy() {
		return false
	}
	c := a.state.ClusterCounts()
	klog.FromContext(ctx).Info("Cluster is unhealthy: too many unready nodes; not scaling", "unready", c.Unready,
		"longUnregistered", c.LongUnregistered, "registered", c.Registered(),
		"okTotalUnreadyCount", a.opts.ClusterState.OkTotalUnreadyCount, "maxTotalUnreadyPercentage", a.opts.ClusterState.MaxTotalUnreadyPercentage)
	a.clusterEvent(apiv1.EventTypeWarning, "ClusterUnhealthy", "Cluster is unhealthy")
	a.loopStopped(obs, fmt.Sprintf("cluster unhealthy (%d unready and %d long unregistered of %d registered nodes; "+
		"--ok-total-unready-count=%d, --max-total-unready-percentage=%g)", c.Unready, c.LongUnregistered, c.Registered(),
		a.opts.ClusterState.OkTotalUnreadyCount, a.opts.ClusterState.MaxTotalUnreadyPercentage))
	return true
}

// repaired runs the repair processors (node healing); when one changed the
// cluster, the next loop decides.
func (a *Autoscaler) repaired(ctx context.Context, obs *Observation) bool {
	if !a.procs.Repair(ctx, obs) {
		return false
	}
	klog.FromContext(ctx).V(2).Info("A repair changed the cluster; deciding in the next loop")
	a.loopStopped(obs, "a repair changed the cluster; the next loop decides")
	return true
}

// enforceMinSizes applies --enforce-node-group-min-size in the loop's
// scale-up session, begun here when the scale-up step began none. It
// returns the session (nil when neither began one) and whether it grew a
// node group.
func (a *Autoscaler) enforceMinSizes(ctx context.Context, obs *Observation,
	session *scaleup.Session) (*scaleup.Session, bool) {
	if !a.opts.EnforceNodeGroupMinSize {
		return session, false
	}
	if session == nil {
		session = a.scaleUp.Begin(ctx, a.sessionInput(obs))
	}
	return session, len(session.EnforceMinSizes(ctx)) > 0
}

// runScaleDown runs the scale-down planner and actuator on the loop's
// session (begun here when no earlier step began one); scaledUp tells it
// that this loop added nodes. It reports whether removals started.
func (a *Autoscaler) runScaleDown(ctx context.Context, obs *Observation, session *scaleup.Session, scaledUp bool) bool {
	if scaledUp {
		a.scaleDn.ScaledUp(obs.Now)
	}
	if session == nil {
		session = a.scaleUp.Begin(ctx, a.sessionInput(obs))
	}
	start := a.clock.Now()
	a.metrics.UpdateLastActivity(metrics.ActivityScaleDown, obs.Now)
	n := a.scaleDn.Run(ctx, scaledown.Input{Now: obs.Now, Nodes: obs.Nodes, ScheduledPods: obs.ScheduledPods,
		State: a.state, Session: session})
	if a.opts.ScaleDownEnabled {
		a.state.ScaleDownProbed(obs.Now) // the planner ran (the status' scaleDown.lastProbeTime)
	}
	observeDuration(a.metrics, metrics.FunctionScaleDown, a.clock.Since(start))
	a.procs.ScaleDownDone(ctx, obs, processors.ScaleDownStatus{RemovalsStarted: n})
	return n > 0
}
