package scaledown

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// Deletion reasons of scaled_down_nodes_total, upstream's.
const (
	ReasonEmpty          = "empty"
	ReasonUnderutilized  = "underutilized"
	ReasonUnready        = "unready"
	evictionRetryPeriod  = 5 * time.Second
	podGonePollPeriod    = time.Second
	extraTerminationWait = 10 * time.Second
	// DelayDeletionAnnotationPrefix starts the node annotations that hold a
	// node's deletion (up to --node-deletion-delay-timeout), upstream's.
	DelayDeletionAnnotationPrefix = "delay-deletion.cluster-autoscaler.kubernetes.io/"
	delayDeletionPollPeriod       = 5 * time.Second
)

// Metrics receives scale-down's numbers and each removal's start and end
// (for the cluster-level events); core.Reporting implements it.
type Metrics interface {
	// RemovingNode is called when the removal of node starts: empty says
	// no pod has to move, pods names those that do.
	RemovingNode(ctx context.Context, node *apiv1.Node, empty bool, utilization float64, pods []string)
	// ScaledDown is called when node was deleted for reason (ReasonEmpty,
	// ReasonUnderutilized, ReasonUnready).
	ScaledDown(ctx context.Context, node *apiv1.Node, reason string)
	RegisterEvictions(succeeded, failed int)
	ObserveNodeRemoval(deleted bool, sinceUnneeded time.Duration)
	// UpdateDuration records how long a step (metrics.Function*) took.
	UpdateDuration(function string, d time.Duration)
}

// Actuator removes nodes in the background: it taints them ToBeDeleted,
// waits --node-delete-delay-after-taint, drains the occupied ones through
// the Eviction API, waits for the delay-deletion annotations to go, checks
// against the API server that no pod was bound meanwhile, and deletes them
// with the cloud provider (empty nodes of a group, and a
// zeroOrMaxNodeScaling group's nodes, in one call). Removals stop when the
// context given to Remove ends (lease lost, shutdown), leaving their taints
// to the next run's start-up clean-up.
type Actuator struct {
	opts     Options
	client   kubernetes.Interface
	taints   *Taints
	recorder record.EventRecorder
	metrics  Metrics
	clock    clock.Clock
	// Poll periods, shorter in tests.
	annotationPoll, podGonePoll, evictionRetry time.Duration

	mu sync.Mutex
	// inFlight maps the nodes being removed to their group; drains counts
	// those of them being drained.
	inFlight map[string]string
	drains   int
	// deleted are the nodes DeleteNodes removed, until the Node goes
	// from the list (the group's target size no longer counts them).
	deleted map[string]bool
	// drainPriorities are --drain-priority-config's entries; empty without it.
	drainPriorities []config.DrainPriority
	// lastDelete and lastFailure feed the cooldowns; byGroup the
	// per-group ones of --scale-down-delay-type-local.
	lastDelete, lastFailure time.Time
	byGroup                 map[string]*groupTimes
	// batches are the deletions gathering per group
	// (--node-deletion-batcher-interval).
	batchMu sync.Mutex
	batches map[string]*deletionBatch
	wg      sync.WaitGroup
	// latency is set with --dynamic-node-delete-delay-after-taint-enabled.
	latency *taintLatency
	// ledger is the disruption engine's (nil: the engine off); told are
	// the nodes of jobs in flight whose end it was told.
	ledger Ledger
	toldMu sync.Mutex
	told   map[string]bool
}

// NewActuator builds an actuator.
func NewActuator(opts Options, client kubernetes.Interface, taints *Taints, recorder record.EventRecorder,
	m Metrics, clk clock.Clock, options ...ActuatorOption) *Actuator {
	a := &Actuator{opts: opts, client: client, taints: taints, recorder: recorder, metrics: m, clock: clk,
		annotationPoll: delayDeletionPollPeriod, podGonePoll: podGonePollPeriod, evictionRetry: evictionRetryPeriod,
		inFlight: map[string]string{}, deleted: map[string]bool{}, byGroup: map[string]*groupTimes{},
		batches: map[string]*deletionBatch{}, told: map[string]bool{}}
	if opts.DrainPriorityConfig != "" {
		// Validate() has checked it; an error here leaves the single round.
		a.drainPriorities, _ = config.ParseDrainPriorityConfig(opts.DrainPriorityConfig)
	}
	for _, o := range options {
		o(a)
	}
	return a
}

// Busy reports the number of removals in flight.
func (a *Actuator) Busy() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.inFlight)
}

// Last returns when a node was last deleted and when a removal last failed.
func (a *Actuator) Last() (deleted, failed time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastDelete, a.lastFailure
}

// groupTimes are when a group last lost a node and last failed to.
type groupTimes struct{ deleted, failed time.Time }

// LastOf returns when a node of group was last deleted and when a removal
// of one last failed.
func (a *Actuator) LastOf(group string) (deleted, failed time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.byGroup[group]; t != nil {
		return t.deleted, t.failed
	}
	return time.Time{}, time.Time{}
}

// Wait blocks until the removals in flight have ended (for shutdown and tests).
func (a *Actuator) Wait() { a.wg.Wait() }

// InFlight returns the removals under way (node to group) and the nodes
// deleted whose Node is still listed, for the planner's min-size room; it
// forgets deleted nodes no longer in listed.
func (a *Actuator) InFlight(listed []*apiv1.Node) (deleting map[string]string, deleted map[string]bool) {
	present := make(map[string]bool, len(listed))
	for _, n := range listed {
		present[n.Name] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	deleting = make(map[string]string, len(a.inFlight))
	for n, g := range a.inFlight {
		deleting[n] = g
	}
	deleted = map[string]bool{}
	for n := range a.deleted {
		if present[n] {
			deleted[n] = true
		} else {
			delete(a.deleted, n)
		}
	}
	return deleting, deleted
}

// Removing names the nodes whose removal is under way or done (a deleted
// node's Node may still be listed).
func (a *Actuator) Removing() map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]bool, len(a.inFlight)+len(a.deleted))
	for n := range a.inFlight {
		out[n] = true
	}
	for n := range a.deleted {
		out[n] = true
	}
	return out
}

// job is one removal run in the background: one occupied node, the empty
// nodes of a group, or all the nodes of a zeroOrMaxNodeScaling group.
type job struct {
	cs     []*Candidate
	atomic bool
}

func (j *job) drains() int {
	n := 0
	for _, c := range j.cs {
		if !c.Empty() {
			n++
		}
	}
	return n
}

// Remove starts removing the candidates, up to --max-scale-down-parallelism
// nodes in flight, of which at most --max-drain-parallelism drained ones (a
// zeroOrMaxNodeScaling group goes whole, beyond the budgets when nothing
// else is in flight). It returns how many nodes it started removing; the
// removals run on ctx.
func (a *Actuator) Remove(ctx context.Context, cs []*Candidate) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var fresh []*Candidate
	for _, c := range cs {
		if a.inFlight[c.Node.Name] == "" { // the planner leaves them out; a second removal would race the first
			fresh = append(fresh, c)
		}
	}
	started := 0
	if a.opts.MaxScaleDownParallelism < 1 {
		fresh = nil // --max-scale-down-parallelism=0: no removal at all, as upstream
	}
	for _, j := range jobsOf(fresh) {
		budget := a.opts.MaxScaleDownParallelism - len(a.inFlight)
		drains := a.opts.MaxDrainParallelism - a.drains
		switch {
		case j.atomic:
			if len(a.inFlight) > 0 && (len(j.cs) > budget || j.drains() > drains) {
				continue
			}
			if j.drains() > 0 && a.opts.MaxDrainParallelism < 1 {
				continue
			}
		case j.drains() > 0:
			if budget < 1 || drains < 1 {
				continue
			}
		default:
			if budget < 1 {
				continue
			}
			j.cs = j.cs[:min(len(j.cs), budget)]
		}
		if j = a.admit(ctx, j); j == nil {
			continue
		}
		for _, c := range j.cs {
			a.inFlight[c.Node.Name] = c.Group.Id()
			if a.metrics != nil {
				a.metrics.RemovingNode(ctx, c.Node, c.Empty(), c.Utilization, podNames(c.Move))
			}
		}
		a.drains += j.drains()
		started += len(j.cs)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			deleted, failed := a.run(ctx, j)
			a.release(j, deleted, failed, ctx.Err() == nil)
		}()
	}
	return started
}

// jobsOf splits candidates into jobs: the empty nodes of each group
// together, the nodes of each zeroOrMaxNodeScaling group together, each
// other node alone; empty nodes first.
func jobsOf(cs []*Candidate) []*job {
	var empty, atomic, full []*job
	emptyOf, atomicOf := map[string]*job{}, map[string]*job{}
	for _, c := range cs {
		id := c.Group.Id()
		switch {
		case c.Atomic:
			if atomicOf[id] == nil {
				atomicOf[id] = &job{atomic: true}
				atomic = append(atomic, atomicOf[id])
			}
			atomicOf[id].cs = append(atomicOf[id].cs, c)
		case c.Empty():
			if emptyOf[id] == nil {
				emptyOf[id] = &job{}
				empty = append(empty, emptyOf[id])
			}
			emptyOf[id].cs = append(emptyOf[id].cs, c)
		default:
			full = append(full, &job{cs: []*Candidate{c}})
		}
	}
	return append(append(empty, atomic...), full...)
}

// release forgets the job's nodes as in flight; deleted ones are kept as
// deleted until their Node goes.
//
// Each node of the job not deleted is told ended to the ledger (failed,
// unless its path said more already) when the job ran its course (over is
// true); a job its context cut short leaves them on record.
func (a *Actuator) release(j *job, deleted []*Candidate, failed, over bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range j.cs {
		delete(a.inFlight, c.Node.Name)
		if over && !slices.Contains(deleted, c) {
			a.ended(c, OutcomeFailed)
		}
		a.forget(c)
	}
	a.drains -= j.drains()
	for _, c := range deleted {
		a.deleted[c.Node.Name] = true
	}
	now := a.clock.Now()
	id := j.cs[0].Group.Id()
	if a.byGroup[id] == nil {
		a.byGroup[id] = &groupTimes{}
	}
	if len(deleted) > 0 {
		a.lastDelete, a.byGroup[id].deleted = now, now
	}
	if failed {
		a.lastFailure, a.byGroup[id].failed = now, now
	}
}

func reasonOf(c *Candidate) string {
	switch {
	case c.Unready:
		return ReasonUnready
	case c.Empty():
		return ReasonEmpty
	}
	return ReasonUnderutilized
}

// evictionRound is pods evicted together, each given at most grace seconds.
type evictionRound struct {
	pods  []*apiv1.Pod
	grace int64
}

// evictionRounds splits pods into the rounds they are evicted in: one
// round with --max-graceful-termination-sec, or with --drain-priority-config
// one per configured priority, lowest first; a pod belongs to the highest
// configured priority not above its own (the lowest when all are above) and
// gets that entry's grace period.
func evictionRounds(pods []*apiv1.Pod, prios []config.DrainPriority, maxGraceSec int) []evictionRound {
	if len(prios) == 0 {
		return []evictionRound{{pods: pods, grace: int64(maxGraceSec)}}
	}
	asc := slices.Clone(prios)
	slices.SortFunc(asc, func(a, b config.DrainPriority) int { return cmp.Compare(a.Priority, b.Priority) })
	rounds := make([]evictionRound, len(asc))
	for i, p := range asc {
		rounds[i].grace = p.TerminationGracePeriodSecs
	}
	for _, pod := range pods {
		prio := int32(0)
		if pod.Spec.Priority != nil {
			prio = *pod.Spec.Priority
		}
		i := 0
		for j, p := range asc {
			if p.Priority <= prio {
				i = j
			}
		}
		rounds[i].pods = append(rounds[i].pods, pod)
	}
	return rounds
}

// evictAll evicts every pod, round by round (see evictionRounds), and
// waits until each round's pods are gone before the next round starts.
func (a *Actuator) evictAll(ctx context.Context, pods []*apiv1.Pod) error {
	for _, r := range evictionRounds(pods, a.drainPriorities, a.opts.MaxGracefulTerminationSec) {
		if len(r.pods) == 0 {
			continue
		}
		if err := a.evictRound(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// evictRound evicts one round's pods in parallel and waits until they are gone.
func (a *Actuator) evictRound(ctx context.Context, r evictionRound) error {
	var wg sync.WaitGroup
	errs := make([]error, len(r.pods))
	for i, p := range r.pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.evict(ctx, p, r.grace)
		}()
	}
	wg.Wait()
	ok, failed := 0, 0
	for _, err := range errs {
		if err != nil {
			failed++
		} else {
			ok++
		}
	}
	a.metrics.RegisterEvictions(ok, failed)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return a.waitGone(ctx, r.pods, r.grace)
}

// evict asks the Eviction API to evict p with at most maxGrace seconds of
// grace, retrying while a PDB refuses it.
func (a *Actuator) evict(ctx context.Context, p *apiv1.Pod, maxGrace int64) error {
	grace := maxGrace
	if p.Spec.TerminationGracePeriodSeconds != nil && *p.Spec.TerminationGracePeriodSeconds < grace {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	deadline := a.clock.Now().Add(a.opts.MaxPodEvictionTime)
	for {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace}}
		err := a.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil:
			a.event(p, apiv1.EventTypeNormal, "ScaleDown", "deleting pod for node scale down")
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsTooManyRequests(err) && a.clock.Now().Before(deadline):
			if !a.sleep(ctx, a.evictionRetry) {
				// Cut short (lease lost, shutting down): not a failure.
				return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, context.Cause(ctx))
			}
		default:
			if ctx.Err() == nil {
				a.event(p, apiv1.EventTypeWarning, "ScaleDownFailed", "failed to delete pod for ScaleDown")
			}
			return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
}

// waitGone waits until the pods left their node (grace period plus a margin).
func (a *Actuator) waitGone(ctx context.Context, pods []*apiv1.Pod, graceSec int64) error {
	deadline := a.clock.Now().Add(time.Duration(graceSec)*time.Second + extraTerminationWait)
	for _, p := range pods {
		for {
			cur, err := a.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (cur.UID != p.UID || cur.Spec.NodeName != p.Spec.NodeName)) {
				break
			}
			if !a.clock.Now().Before(deadline) {
				return fmt.Errorf("pod %s/%s still on the node after %v", p.Namespace, p.Name,
					time.Duration(graceSec)*time.Second)
			}
			if !a.sleep(ctx, a.podGonePoll) {
				return fmt.Errorf("waiting for pod %s/%s to go: %w", p.Namespace, p.Name, context.Cause(ctx))
			}
		}
	}
	return nil
}

// evictDaemonSetPods evicts a node's DaemonSet pods, best effort, as the
// per-pod annotation and the flag say.
func (a *Actuator) evictDaemonSetPods(ctx context.Context, c *Candidate, flagDefault bool) {
	for _, p := range c.DaemonSet {
		if !drain.EvictDaemonSetPod(p, flagDefault) {
			continue
		}
		grace := int64(a.opts.MaxGracefulTerminationSec)
		for _, r := range evictionRounds([]*apiv1.Pod{p}, a.drainPriorities, a.opts.MaxGracefulTerminationSec) {
			if len(r.pods) > 0 {
				grace = r.grace
			}
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace}}
		if err := a.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(2).Info("Evicting a DaemonSet pod failed; the node goes anyway", "pod", klog.KObj(p), "err", err)
		}
	}
}

// failed undoes a removal that did not complete and records it.
func (a *Actuator) failed(ctx context.Context, c *Candidate, why string) {
	logger := klog.FromContext(ctx)
	logger.Info("Scale-down of a node failed", "node", c.Node.Name, "nodeGroup", c.Group.Id(), "why", why)
	a.ended(c, OutcomeFailed)
	if err := a.taints.UnmarkToBeDeleted(ctx, c.Node.Name); err != nil {
		logger.Error(err, "Untainting a node after a failed scale-down", "node", c.Node.Name)
	}
	if c.Empty() {
		a.event(c.Node, apiv1.EventTypeWarning, "ScaleDownFailed", "failed to delete empty node: %s", why)
	} else {
		a.event(c.Node, apiv1.EventTypeWarning, "ScaleDownFailed", "failed to drain and delete node: %s", why)
	}
	a.metrics.ObserveNodeRemoval(false, a.clock.Since(c.Since))
}

// sleep waits d on the actuator's clock; it returns false when ctx ended first.
func (a *Actuator) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := a.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

func (a *Actuator) event(obj interface{ GetName() string }, kind, reason, format string, args ...any) {
	if a.recorder == nil {
		return
	}
	switch o := obj.(type) {
	case *apiv1.Node:
		a.recorder.Eventf(o, kind, reason, format, args...)
	case *apiv1.Pod:
		a.recorder.Eventf(o, kind, reason, format, args...)
	}
}
