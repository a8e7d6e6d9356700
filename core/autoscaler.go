package core

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cleanup"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	"k8s.io/client-go/tools/record"
)

// Listers are the informer-backed views the loop reads. Nothing in a loop
// lists from the API server directly.
type Listers struct {
	Nodes corelisters.NodeLister
	Pods  corelisters.PodLister
}

// Autoscaler runs one loop at a time over an observation of the cluster.
type Autoscaler struct {
	opts     Options
	listers  Listers
	provider cloudprovider.CloudProvider
	state    *clusterstate.Registry
	status   *clusterstate.StatusWriter
	scaleUp  ScaleUpper
	procs    processors.Set
	cleaner  *cleanup.Cleaner
	scaleDn  *scaledown.ScaleDown
	recorder record.EventRecorder
	metrics  *metrics.Metrics
	clock    clock.PassiveClock
	// snapshots, when set, is fed the observation of a loop that a
	// /snapshotz request waits for.
	snapshots *Snapshotter
	// snapshotObjects lists the objects a snapshot carries besides nodes
	// and pods.
	snapshotObjects func() (*SnapshotObjects, error)
	// firstLoop is the observation time of the first loop.
	firstLoop time.Time
	// explain, when set, is told where each loop begins and ends.
	explain LoopRecorder
	// consolidation, when set, runs after the scale-down (consolidation.go).
	consolidation *Consolidation
}

// LoopRecorder keeps the reasons of the last complete loop (the
// explainer's record, which scale-up and scale-down fill in);
// *explain.Recorder implements it.
type LoopRecorder interface {
	BeginLoop(now time.Time)
	EndLoop()
	// SetAside records pending pods the pod-list processors left out
	// of the scale-up.
	SetAside(pods []*apiv1.Pod)
	// LoopStopped records the pending pods of a loop that stopped before
	// its scale-up, with why.
	LoopStopped(pods []*apiv1.Pod, why string)
}

// WithExplainer marks each loop's beginning and end on r, so that r keeps
// the reasons of the last complete loop only.
func WithExplainer(r LoopRecorder) AutoscalerOption { return func(a *Autoscaler) { a.explain = r } }

// ScaleUpper starts the loop's scale-up session; *scaleup.Orchestrator implements it.
type ScaleUpper interface {
	Begin(ctx context.Context, in scaleup.Input) *scaleup.Session
}

// AutoscalerOption configures an Autoscaler.
type AutoscalerOption func(*Autoscaler)

// WithScaleUp enables the scale-up step.
func WithScaleUp(s ScaleUpper) AutoscalerOption { return func(a *Autoscaler) { a.scaleUp = s } }

// WithEventRecorder records events on pods (TriggeredScaleUp, NotTriggerScaleUp).
func WithEventRecorder(r record.EventRecorder) AutoscalerOption {
	return func(a *Autoscaler) { a.recorder = r }
}

// WithClusterState shares the registry of node group state with the
// scale-up orchestrator; without it the loop keeps its own.
func WithClusterState(r *clusterstate.Registry) AutoscalerOption {
	return func(a *Autoscaler) { a.state = r }
}

// WithStatusWriter writes the status ConfigMap at the end of every loop.
func WithStatusWriter(w *clusterstate.StatusWriter) AutoscalerOption {
	return func(a *Autoscaler) { a.status = w }
}

// WithProcessors sets the loop's extension points (see package
// processors). Without it every pending pod reaches the scale-up.
func WithProcessors(s processors.Set) AutoscalerOption {
	return func(a *Autoscaler) { a.procs = s }
}

// WithCleanup deletes broken instances and fixes drifted target sizes
// before anything else acts.
func WithCleanup(c *cleanup.Cleaner) AutoscalerOption {
	return func(a *Autoscaler) { a.cleaner = c }
}

// WithScaleDown enables the scale-down step.
func WithScaleDown(s *scaledown.ScaleDown) AutoscalerOption {
	return func(a *Autoscaler) { a.scaleDn = s }
}

// WithPassiveClock replaces the real clock used to time the loop's steps.
func WithPassiveClock(c clock.PassiveClock) AutoscalerOption {
	return func(a *Autoscaler) { a.clock = c }
}

// NewAutoscaler builds the loop.
func NewAutoscaler(opts Options, listers Listers, provider cloudprovider.CloudProvider, m *metrics.Metrics,
	options ...AutoscalerOption) *Autoscaler {
	a := &Autoscaler{opts: opts, listers: listers, provider: provider, metrics: m, clock: clock.RealClock{}}
	for _, o := range options {
		o(a)
	}
	if a.state == nil {
		a.state = clusterstate.NewRegistry(opts.ClusterState)
	}
	return a
}

// Observation is the state one loop decides on; it is read once per loop
// and is what the processors see of the loop.
type Observation = processors.Loop

// RunOnce runs one loop as a list of steps: observe the cluster, update the
// cluster state, stop before scaling when the cluster must not be scaled or
// cleanup or a repair changed it, then scale up, enforce the node groups'
// minimum sizes and scale down, in one scale-up session. Once the cluster
// state is updated, the metrics and the status ConfigMap are written
// whatever the outcome.
func (a *Autoscaler) RunOnce(ctx context.Context, now time.Time) (Result, error) {
	obs, err := a.observeCluster(ctx, now)
	if err != nil {
		return Result{}, err
	}
	if a.explain != nil {
		a.explain.BeginLoop(obs.Now)
		defer a.explain.EndLoop()
	}
	if err := a.updateClusterState(ctx, obs); err != nil {
		return Result{}, err
	}
	defer a.writeStatus(ctx, obs.Now)
	defer a.report(ctx, obs)
	if res, stop := a.stopBeforeScaling(ctx, obs); stop {
		return res, nil
	}
	res, session, err := a.runScaleUp(ctx, obs)
	if err != nil || a.scaleUp == nil {
		return res, err
	}
	session, grown := a.enforceMinSizes(ctx, obs, session)
	res.Productive = res.Productive || grown
	if session == nil && (a.scaleDn != nil || a.consolidation != nil) {
		session = a.scaleUp.Begin(ctx, a.sessionInput(obs))
	}
	if a.scaleDn != nil {
		keep := a.beforeScaleDown(session)
		if a.runScaleDown(ctx, obs, session, res.Productive) {
			res.Productive = true
		}
		keep()
	}
	a.consolidate(ctx, obs, session)
	return res, nil
}

// noReadyNodes applies --scale-up-from-zero=false: with no ready node in
// the cluster the loop stops there, as upstream's does (no cleanup, no
// scaling), with a ClusterUnhealthy event: at once when there is no node at
// all, and one provision time after the first loop when there are nodes
// but none is ready (they may simply not be ready yet at start-up).
func (a *Autoscaler) noReadyNodes(ctx context.Context, now time.Time) bool {
	if a.firstLoop.IsZero() {
		a.firstLoop = now
	}
	if a.opts.ScaleUpFromZero || a.state.ClusterCounts().Ready > 0 {
		return false
	}
	msg, event := "Cluster has no ready nodes.", now.Sub(a.firstLoop) >= a.opts.ClusterState.NodeGroupDefaults.MaxNodeProvisionTime
	if a.state.ClusterCounts().Registered() == 0 {
		msg, event = "Cluster has no nodes.", true
	}
	klog.FromContext(ctx).Info("No ready node and --scale-up-from-zero=false: not acting in this loop", "why", msg)
	a.metrics.UpdateClusterSafeToAutoscale(false)
	if event {
		a.clusterEvent(apiv1.EventTypeWarning, "ClusterUnhealthy", "%s", msg)
	}
	return true
}

// updateClusterState feeds the loop's observation to the registry and
// accounts for the node groups it backed off.
func (a *Autoscaler) updateClusterState(ctx context.Context, obs *Observation) error {
	start := a.clock.Now()
	defer func() { observeDuration(a.metrics, metrics.FunctionUpdateClusterState, a.clock.Since(start)) }()
	if err := a.state.Update(ctx, a.provider, obs.Nodes, obs.Now); err != nil {
		return NewLoopError(metrics.CloudProviderError, fmt.Errorf("updating the cluster state: %w", err))
	}
	for _, f := range a.state.Failures() {
		if f.Reason.ErrorCode == clusterstate.TimeoutErrorCode {
			a.metrics.RegisterFailedScaleUp(metrics.TimeoutError, 0, a.groupGPU(ctx, f.NodeGroup))
			a.clusterEvent(apiv1.EventTypeWarning, "ScaleUpTimedOut", "Nodes added to group %s failed to register within %v",
				f.NodeGroup, a.provisionTime(f.NodeGroup))
			continue
		}
		a.metrics.RegisterFailedScaleUp(metrics.CloudProviderError, 0, a.groupGPU(ctx, f.NodeGroup))
		a.clusterEvent(apiv1.EventTypeWarning, "ScaleUpFailed", "Failed adding nodes to group %s due to %s: %s",
			f.NodeGroup, f.Reason.ErrorCode, f.Reason.ErrorMessage)
	}
	a.metrics.UpdateClusterSafeToAutoscale(a.state.ClusterHealthy())
	return nil
}

// groupGPU tells the GPU labels of a group's template, for the metrics of
// its failures (none when the template cannot be read).
func (a *Autoscaler) groupGPU(ctx context.Context, group string) metrics.GPU {
	gs := a.state.Group(group)
	if gs == nil {
		return metrics.GPU{}
	}
	info, err := gs.NodeGroup.TemplateNodeInfo(ctx)
	if err != nil || info == nil || info.Node == nil {
		return metrics.GPU{}
	}
	return metrics.GPUOf(a.provider.GetNodeGpuConfig(ctx, info.Node), info.Node, a.provider.GetAvailableGPUTypes(ctx)).
		WithDevices(info.ResourceSlices)
}

func (a *Autoscaler) provisionTime(group string) time.Duration {
	if gs := a.state.Group(group); gs != nil {
		return gs.Options.MaxNodeProvisionTime
	}
	return a.opts.ClusterState.NodeGroupDefaults.MaxNodeProvisionTime
}

// writeStatus writes the status ConfigMap, whatever the loop's outcome.
func (a *Autoscaler) writeStatus(ctx context.Context, now time.Time) {
	if a.status == nil {
		return
	}
	var candidates clusterstate.ScaleDownCandidates
	if a.scaleDn != nil {
		candidates = a.scaleDn.Candidates
	}
	st := a.state.Status(now, candidates)
	var unremovable []clusterstate.UnremovableNode
	if a.scaleDn != nil {
		unremovable = a.scaleDn.Unremovable(100)
	}
	if err := a.status.Write(ctx, st, unremovable...); err != nil {
		klog.FromContext(ctx).Error(err, "Writing the status ConfigMap")
	}
}

// clusterEvent records a cluster-level event on the status ConfigMap.
func (a *Autoscaler) clusterEvent(eventType, reason, format string, args ...any) {
	if a.recorder == nil || a.status == nil {
		return
	}
	a.recorder.Eventf(a.status.Reference(), eventType, reason, format, args...)
}

// runScaleUp adds nodes for the pending pods the pod-list processors pass
// on, after the capacity processors (ProvisioningRequests) have booked,
// checked and scaled in the same session.
func (a *Autoscaler) runScaleUp(ctx context.Context, obs *Observation) (Result, *scaleup.Session, error) {
	if a.scaleUp == nil {
		return Result{}, nil, nil
	}
	pending := a.procs.Pods(ctx, obs)
	a.recordSetAside(obs.PendingPods, pending)
	status := processors.ScaleUpStatus{Pods: pending}
	defer func() { a.procs.ScaleUpDone(ctx, obs, status) }()
	if len(pending) == 0 && !a.procs.HasCapacityWork() {
		return Result{}, nil, nil
	}
	start := a.clock.Now()
	defer func() { observeDuration(a.metrics, metrics.FunctionScaleUp, a.clock.Since(start)) }()
	a.metrics.UpdateLastActivity(metrics.ActivityScaleUp, obs.Now)
	in := a.sessionInput(obs)
	in.Excluded = a.procs.ExcludedNodeGroups(ctx, obs)
	session := a.scaleUp.Begin(ctx, in)
	status.Session = session
	productive := a.procs.ProcessCapacity(ctx, obs, session)
	if len(pending) == 0 {
		session.NoPending(ctx)
		status.Added = session.Added()
		return Result{Productive: productive || session.Added() > 0}, session, nil
	}
	before := session.Added()
	res := session.ScaleUp(ctx, pending)
	added := session.Added() - before
	status.Result, status.Added = res, session.Added()
	logScaleUp(ctx, len(pending), res, added)
	return Result{Productive: added > 0 || productive}, session, nil
}

// logScaleUp logs the scale-up's failures, the pods it left pending and
// its decision. Failed increases are counted (failed_scale_ups_total) and
// recorded (FailedToScaleUpGroup) by the Reporting the orchestrator was
// given, not here.
func logScaleUp(ctx context.Context, pending int, res scaleup.Result, added int) {
	logger := klog.FromContext(ctx)
	for _, e := range res.Errors {
		logger.Error(e, "Scale-up failed", "transient", isTransientIncrease(e))
	}
	if len(res.Remaining) > 0 {
		for p, reason := range res.Remaining {
			logger.V(4).Info("Pod did not trigger a scale-up", "pod", klog.KObj(p), "reason", reason)
		}
		logger.V(2).Info("Pods left pending", "count", len(res.Remaining))
	}
	logger.V(2).Info("Scale-up decision", "unschedulable", pending, "fitExisting", res.FitExisting,
		"increases", len(res.Increases), "nodesAdded", added, "nominated", res.Nominated)
}

// sessionInput is what every scale-up session of the loop begins with. All
// the pending pods go in, not only those the pod-list processors pass on:
// the session puts those the scheduler nominated to a node on that node
// (scaleup.Input.Pending), so that the scale-down, too, sees them there.
func (a *Autoscaler) sessionInput(obs *Observation) scaleup.Input {
	return scaleup.Input{Now: obs.Now, Nodes: obs.Nodes, ScheduledPods: obs.ScheduledPods, Pending: obs.PendingPods}
}

// loopStopped tells the explainer why the loop's pending pods got no
// scale-up: the loop stopped before it.
func (a *Autoscaler) loopStopped(obs *Observation, why string) {
	if a.explain != nil {
		a.explain.LoopStopped(obs.PendingPods, why)
	}
}

// recordSetAside tells the explainer which pending pods the pod-list
// processors left out of the scale-up.
func (a *Autoscaler) recordSetAside(all, kept []*apiv1.Pod) {
	if a.explain == nil || len(all) == len(kept) {
		return
	}
	in := make(map[*apiv1.Pod]bool, len(kept))
	for _, p := range kept {
		in[p] = true
	}
	var aside []*apiv1.Pod
	for _, p := range all {
		if !in[p] {
			aside = append(aside, p)
		}
	}
	a.explain.SetAside(aside)
}

// refreshCloud lets the provider update its view; it runs before any other provider call.
func (a *Autoscaler) refreshCloud(ctx context.Context) error {
	start := a.clock.Now()
	defer func() { observeDuration(a.metrics, metrics.FunctionCloudProviderRefresh, a.clock.Since(start)) }()
	if err := a.provider.Refresh(ctx); err != nil {
		return NewLoopError(metrics.CloudProviderError, fmt.Errorf("refreshing the cloud provider: %w", err))
	}
	return nil
}

// observe reads the node groups from the provider and the cluster from the informer caches.
func (a *Autoscaler) observe(ctx context.Context, now time.Time) (*Observation, error) {
	nodes, err := a.listers.Nodes.List(labels.Everything())
	if err != nil {
		return nil, NewLoopError(metrics.APICallError, fmt.Errorf("listing nodes: %w", err))
	}
	pods, err := a.listers.Pods.List(labels.Everything())
	if err != nil {
		return nil, NewLoopError(metrics.APICallError, fmt.Errorf("listing pods: %w", err))
	}
	groups, err := a.provider.NodeGroups(ctx)
	if err != nil {
		return nil, NewLoopError(metrics.CloudProviderError, fmt.Errorf("listing node groups: %w", err))
	}
	obs := &Observation{Now: now, NodeGroups: groups, Nodes: nodes}
	// The scheduled pods are most of them: one slice of their number at
	// most, instead of one grown by doubling.
	scheduled := make([]*apiv1.Pod, 0, len(pods))
	for _, p := range pods {
		switch {
		case p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed:
		case p.Spec.NodeName != "":
			scheduled = append(scheduled, p)
		default:
			obs.PendingPods = append(obs.PendingPods, p)
		}
	}
	if len(scheduled) > 0 {
		obs.ScheduledPods = scheduled
	}
	klog.FromContext(ctx).V(4).Info("Observed cluster", "nodes", len(nodes),
		"scheduledPods", len(obs.ScheduledPods), "pendingPods", len(obs.PendingPods))
	return obs, nil
}

// report exports what the loop observed.
func (a *Autoscaler) report(ctx context.Context, obs *Observation) {
	counts := a.state.ClusterCounts()
	a.metrics.UpdateNodesCount(counts.Ready, counts.Unready, counts.NotStarted, counts.Suspended, counts.Unregistered,
		counts.LongUnregistered)
	a.metrics.UpdateNodeGroupsCount(len(obs.NodeGroups))
	if a.opts.EmitPerNodeGroupMetrics {
		for _, gs := range a.state.Groups() {
			ng := gs.NodeGroup
			a.metrics.UpdateNodeGroup(ng.Id(), ng.MinSize(), ng.MaxSize(), gs.Target, gs.Healthy, gs.BackedOff,
				gs.BackoffReason.ErrorCode)
		}
	}
	a.reportClusterSize(obs)
	mismatches := map[metrics.DRAMismatch]int{}
	for k, n := range a.state.DRATemplateMismatches() {
		mismatches[metrics.DRAMismatch{Driver: k.Driver, Type: k.Type}] = n
	}
	a.metrics.UpdateDRATemplateMismatches(mismatches)
	unschedulable, unprocessed := 0, 0
	for _, p := range obs.PendingPods {
		switch {
		case processors.IsUnschedulable(p):
			unschedulable++
		case a.schedulerUnprocessed(p):
			unprocessed++
		}
	}
	a.metrics.UpdateUnschedulablePodsCount(unschedulable, unprocessed)
	a.metrics.UpdateNodeTaintsCount(obs.Nodes, metrics.TaintKinds{Startup: append(append([]string(nil),
		a.opts.ClusterState.Taints.StartupTaints...), a.opts.ClusterState.Taints.IgnoreTaints...),
		StartupPrefixes: a.opts.ClusterState.Taints.StartupTaintPrefixes, Status: a.opts.ClusterState.Taints.StatusTaints})
	a.metrics.UpdateLastActivity(metrics.ActivityAutoscaling, obs.Now)
	klog.FromContext(ctx).V(2).Info("Loop summary", "nodeGroups", len(obs.NodeGroups), "ready", counts.Ready, "unready", counts.Unready,
		"notStarted", counts.NotStarted, "suspended", counts.Suspended, "unregistered", counts.Unregistered, "longUnregistered", counts.LongUnregistered,
		"unschedulablePods", unschedulable)
}

// schedulerUnprocessed reports whether p is a pending pod of one of
// --bypassed-scheduler-names that its scheduler has not processed yet.
func (a *Autoscaler) schedulerUnprocessed(p *apiv1.Pod) bool {
	if p.Spec.NodeName != "" || len(a.opts.BypassedSchedulerNames) == 0 {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return false
		}
	}
	name := p.Spec.SchedulerName
	if name == "" {
		name = apiv1.DefaultSchedulerName
	}
	for _, n := range a.opts.BypassedSchedulerNames {
		if n == name {
			return true
		}
	}
	return false
}

// reportClusterSize exports the node limit and the cluster's cores and memory
// against --cores-total and --memory-total.
func (a *Autoscaler) reportClusterSize(obs *Observation) {
	maxNodes := 0
	for _, g := range obs.NodeGroups {
		maxNodes += g.MaxSize()
	}
	if a.opts.MaxNodesTotal > 0 {
		maxNodes = min(maxNodes, a.opts.MaxNodesTotal)
	}
	var cores, memory float64
	for _, n := range obs.Nodes {
		cores += n.Status.Capacity.Cpu().AsApproximateFloat64()
		memory += n.Status.Capacity.Memory().AsApproximateFloat64()
	}
	a.metrics.UpdateClusterSize(maxNodes, cores, memory, a.opts.Cores.Min, a.opts.Cores.Max,
		a.opts.MemoryGiB.Min<<30, a.opts.MemoryGiB.Max<<30)
}
