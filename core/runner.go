package core

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

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

// Run loops until ctx is done, then returns nil. It returns
// ErrLoopPanicked when MaxConsecutivePanics loops in a row panicked.
func (r *Runner) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for n := 1; ; n++ {
		start := r.clock.Now()
		res := r.runOnce(ctx, n, start)
		if ctx.Err() != nil {
			logger.V(2).Info("Loop runner stopping", "loops", n)
			return nil
		}
		if r.panics >= MaxConsecutivePanics {
			logger.Error(ErrLoopPanicked, "Loop runner stopping", "loops", n, "consecutivePanics", r.panics)
			return fmt.Errorf("%w: %d loops in a row", ErrLoopPanicked, r.panics)
		}
		if r.frequent && res.Productive {
			continue
		}
		waitStart := r.clock.Now()
		timer := r.clock.NewTimer(r.scanInterval - waitStart.Sub(start))
		select {
		case <-ctx.Done():
			timer.Stop()
			logger.V(2).Info("Loop runner stopping", "loops", n)
			return nil
		case <-timer.C():
		case <-r.trigger:
			timer.Stop()
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
