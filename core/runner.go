package core

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// Result is what one loop reports to the Runner.
type Result struct {
	// Productive is true when the loop changed the cluster (scaled, deleted,
	// answered a ProvisioningRequest): the next loop then runs at once.
	Productive bool
}

// Loop is one autoscaler iteration; *Autoscaler implements it.
type Loop interface {
	RunOnce(ctx context.Context, now time.Time) (Result, error)
}

// Runner triggers the loop: every scan interval, at once after a productive
// loop, and at once when Trigger is called (a new unschedulable pod). It keeps
// the health check and the loop metrics current.
type Runner struct {
	loop         Loop
	clock        clock.Clock
	scanInterval time.Duration
	frequent     bool
	health       *HealthCheck
	metrics      *metrics.Metrics
	trigger      chan struct{}
	// panics counts the loops in a row that panicked.
	panics int

	// The batching window of pod triggers: a loop asked for by new
	// unschedulable pods starts once none arrived for batchIdle, or
	// batchMax after the first one, so that a burst gets one decision.
	batchIdle, batchMax time.Duration
	batchMu             sync.Mutex
	batchFirst          time.Time // zero: no batch open
	batchLast           time.Time
	batchCount          int // pod triggers in the open batch
	batchKeys           map[string]bool

	// betweenLoops runs at the start of each wait between two loops.
	betweenLoops func(ctx context.Context, wait time.Duration)
}

// MaxConsecutivePanics is how many loops in a row may panic before Run gives
// up and returns ErrLoopPanicked: a panic that one loop hits by chance is
// logged, counted and survived, one that every loop hits ends the process
// (exit code 1) so that it restarts, as upstream's does, instead of looking
// healthy while it does nothing.
const MaxConsecutivePanics = 3

// ErrLoopPanicked is returned by Run after MaxConsecutivePanics loops in a
// row panicked.
var ErrLoopPanicked = errors.New("the autoscaling loop panicked repeatedly")

// RunnerOption configures a Runner.
type RunnerOption func(*Runner)

// WithFrequentLoops enables running the next loop at once after a productive
// loop or a Trigger (upstream's --frequent-loops-enabled).
func WithFrequentLoops(enabled bool) RunnerOption { return func(r *Runner) { r.frequent = enabled } }

// WithPodBatching sets the batching window of PodTrigger: a loop starts once
// no new trigger arrived for idle, or max after the first trigger of the
// batch. An idle of 0 turns batching off.
func WithPodBatching(idle, max time.Duration) RunnerOption {
	return func(r *Runner) { r.batchIdle, r.batchMax = idle, max }
}

// WithBetweenLoops sets work to do at the start of each wait between two
// loops (not after a productive loop whose successor runs at once), given
// how long the wait is to be; the time it takes comes out of the wait.
// The binary collects the heap there (heapgovernor.IdleCollector).
func WithBetweenLoops(f func(ctx context.Context, wait time.Duration)) RunnerOption {
	return func(r *Runner) { r.betweenLoops = f }
}

// WithClock replaces the real clock, for tests.
func WithClock(c clock.Clock) RunnerOption { return func(r *Runner) { r.clock = c } }

// NewRunner builds a Runner around loop.
func NewRunner(loop Loop, scanInterval time.Duration, health *HealthCheck, m *metrics.Metrics, opts ...RunnerOption) *Runner {
	r := &Runner{loop: loop, clock: clock.RealClock{}, scanInterval: scanInterval, health: health, metrics: m,
		trigger: make(chan struct{}, 1)}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Trigger asks for a loop as soon as the current one ends. It never blocks.
func (r *Runner) Trigger() {
	if !r.frequent {
		return
	}
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// PodTrigger asks for a loop because a pod newly became unschedulable; key
// names the pod's workload (its controller, or the pod itself). The loop
// waits for the batching window (WithPodBatching) so that a burst that the
// ReplicaSet controller and the scheduler release over several seconds is
// decided on at once: the window opens with the first trigger and is
// extended by the first trigger of each other workload and by PodArrived;
// the twins of a workload already in the batch do not extend it, since the
// loop counts a marked pod's pending twins with it. It never blocks.
func (r *Runner) PodTrigger(key string) {
	if !r.frequent {
		return
	}
	if r.batchIdle > 0 {
		now := r.clock.Now()
		r.batchMu.Lock()
		if r.batchFirst.IsZero() {
			r.batchFirst, r.batchLast, r.batchKeys = now, now, map[string]bool{key: true}
		} else if !r.batchKeys[key] {
			r.batchKeys[key] = true
			r.batchLast = now
		}
		r.batchCount++
		r.batchMu.Unlock()
	}
	r.Trigger()
}

// PodArrived says a new pending pod of workload key (WorkloadKey) was
// created: an open batch waits for the rest of its burst. A pod whose
// workload is already in the batch and counted whole (counted: the loop
// counts the replicas its controller has still to create, so nothing of it
// is left to wait for) does not extend the window. It starts no loop by
// itself and never blocks.
func (r *Runner) PodArrived(key string, counted bool) {
	if !r.frequent || r.batchIdle <= 0 {
		return
	}
	now := r.clock.Now()
	r.batchMu.Lock()
	if !r.batchFirst.IsZero() && !(counted && r.batchKeys[key]) {
		r.batchLast = now
	}
	r.batchMu.Unlock()
}

// openBatch returns the first and last trigger of the open batch.
func (r *Runner) openBatch() (first, last time.Time) {
	r.batchMu.Lock()
	defer r.batchMu.Unlock()
	return r.batchFirst, r.batchLast
}

// closeBatch closes the open batch and drops a pending trigger: a loop
// starting now sees the pods and requests that asked for it.
func (r *Runner) closeBatch(ctx context.Context) {
	r.batchMu.Lock()
	if !r.batchFirst.IsZero() {
		klog.FromContext(ctx).V(2).Info("Loop for a batch of unschedulable pods", "podEvents", r.batchCount,
			"batchSpan", r.batchLast.Sub(r.batchFirst), "sinceFirst", r.clock.Since(r.batchFirst))
	}
	r.batchFirst, r.batchLast, r.batchCount, r.batchKeys = time.Time{}, time.Time{}, 0, nil
	r.batchMu.Unlock()
	select {
	case <-r.trigger:
	default:
	}
}

// awaitBatch waits until the open batch, if any, is complete: no trigger
// for batchIdle, or batchMax since its first trigger. It returns false when
// ctx ended.
func (r *Runner) awaitBatch(ctx context.Context) bool {
	for {
		first, last := r.openBatch()
		if first.IsZero() {
			return true
		}
		deadline := last.Add(r.batchIdle)
		if limit := first.Add(r.batchMax); limit.Before(deadline) {
			deadline = limit
		}
		wait := deadline.Sub(r.clock.Now())
		if wait <= 0 {
			return true
		}
		timer := r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C():
		}
	}
}

// Run loops until ctx is done, then returns nil. It returns
// ErrLoopPanicked when MaxConsecutivePanics loops in a row panicked.
func (r *Runner) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for n := 1; ; n++ {
		start := r.clock.Now()
		r.closeBatch(ctx)
		res := r.runOnce(ctx, n, start)
		if ctx.Err() != nil {
			logger.V(2).Info("Loop runner stopping", "loops", n)
			return nil
		}
		if r.panics >= MaxConsecutivePanics {
			logger.Error(ErrLoopPanicked, "Loop runner stopping", "loops", n, "consecutivePanics", r.panics)
			return fmt.Errorf("%w: %d loops in a row", ErrLoopPanicked, r.panics)
		}
		waitStart := r.clock.Now()
		if !r.frequent || !res.Productive {
			if r.betweenLoops != nil {
				r.betweenLoops(ctx, r.scanInterval-waitStart.Sub(start))
			}
			timer := r.clock.NewTimer(r.scanInterval - r.clock.Since(start))
			select {
			case <-ctx.Done():
				timer.Stop()
				logger.V(2).Info("Loop runner stopping", "loops", n)
				return nil
			case <-timer.C():
			case <-r.trigger:
				timer.Stop()
			}
		}
		// Whatever woke the runner (the scan interval, a trigger, a
		// productive loop), pods still arriving in a burst are waited for.
		if !r.awaitBatch(ctx) {
			logger.V(2).Info("Loop runner stopping", "loops", n)
			return nil
		}
		r.metrics.UpdateDuration(metrics.FunctionLoopWait, r.clock.Since(waitStart))
	}
}

func (r *Runner) runOnce(ctx context.Context, n int, start time.Time) Result {
	logger := klog.FromContext(ctx).WithValues("loop", n)
	r.health.UpdateLastActivity(start)
	r.metrics.UpdateLastActivity(metrics.ActivityMain, start)

	res, err := r.safeRunOnce(klog.NewContext(ctx, logger), start)
	end := r.clock.Now()
	r.metrics.UpdateDuration(metrics.FunctionMain, end.Sub(start))
	r.metrics.FlushAggregatedDurations()
	if err != nil && ctx.Err() == nil {
		t := errorType(err)
		logger.Error(err, "Loop failed", "type", t)
		if t != metrics.TransientError {
			r.metrics.RegisterError(t)
			return res
		}
	}
	r.health.UpdateLastSuccessfulRun(end)
	r.metrics.UpdateLastActivity(metrics.ActivityMainSuccessful, end)
	return res
}

// panicError is a loop's panic turned into an error.
type panicError struct{ value any }

func (p panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// safeRunOnce runs one loop and turns a panic into an internal error: the
// stack is logged at once, errors_total{type="internalError"} counts it (as
// runOnce does for every internal error) and the loop counts as failed, so
// the health check's --max-failing-time applies.
func (r *Runner) safeRunOnce(ctx context.Context, start time.Time) (res Result, err error) {
	defer func() {
		v := recover()
		if v == nil {
			r.panics = 0
			return
		}
		r.panics++
		err = NewLoopError(metrics.InternalError, panicError{v})
		klog.FromContext(ctx).Error(err, "Loop panicked", "consecutivePanics", r.panics,
			"maxConsecutivePanics", MaxConsecutivePanics, "stack", string(debug.Stack()))
		klog.Flush()
		res = Result{}
	}()
	return r.loop.RunOnce(ctx, start)
}

// WorkloadKey names a pod's workload for batching: its controller's UID, or
// the pod's own for a pod without one.
func WorkloadKey(p *apiv1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return string(ref.UID)
	}
	return "pod:" + string(p.UID)
}
