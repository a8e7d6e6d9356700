package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// scriptedLoop returns the scripted results in order and records call times.
type scriptedLoop struct {
	mu      sync.Mutex
	results []Result
	errs    []error
	calls   []time.Time
	called  chan struct{}
}

func (l *scriptedLoop) RunOnce(_ context.Context, now time.Time) (Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := len(l.calls)
	l.calls = append(l.calls, now)
	defer func() { l.called <- struct{}{} }()
	var res Result
	var err error
	if i < len(l.results) {
		res = l.results[i]
	}
	if i < len(l.errs) {
		err = l.errs[i]
	}
	return res, err
}

func newTestRunner(loop Loop, c *clocktesting.FakeClock, frequent bool) (*Runner, *HealthCheck, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	h := NewHealthCheck(c, 10*time.Minute, 15*time.Minute, 20*time.Minute)
	h.StartMonitoring()
	return NewRunner(loop, 10*time.Second, h, metrics.New(reg), WithClock(c), WithFrequentLoops(frequent)), h, reg
}

func waitCall(t *testing.T, l *scriptedLoop) {
	t.Helper()
	select {
	case <-l.called:
	case <-time.After(5 * time.Second):
		t.Fatal("loop not called")
	}
}

func TestRunnerTiming(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	loop := &scriptedLoop{results: []Result{{}, {Productive: true}, {}, {}}, called: make(chan struct{}, 10)}
	r, _, _ := newTestRunner(loop, c, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()

	waitCall(t, loop) // loop 1 at once
	// Loop 2 only when the scan interval has passed.
	for !c.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	c.Step(9 * time.Second)
	select {
	case <-loop.called:
		t.Fatal("loop 2 ran before the scan interval")
	case <-time.After(50 * time.Millisecond):
	}
	c.Step(time.Second)
	waitCall(t, loop) // loop 2, productive
	waitCall(t, loop) // loop 3 at once, without the clock moving
	// Loop 4 on a trigger, before the interval.
	for !c.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	r.Trigger()
	waitCall(t, loop)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []time.Time{c.Now().Add(-10 * time.Second), c.Now(), c.Now(), c.Now()}
	for i := range want {
		if !loop.calls[i].Equal(want[i]) {
			t.Errorf("call %d at %v, want %v", i+1, loop.calls[i], want[i])
		}
	}
}

func TestRunnerWithoutFrequentLoopsIgnoresTriggers(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	loop := &scriptedLoop{results: []Result{{Productive: true}}, called: make(chan struct{}, 10)}
	r, _, _ := newTestRunner(loop, c, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	waitCall(t, loop)
	for !c.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	r.Trigger()
	select {
	case <-loop.called:
		t.Fatal("a productive loop or trigger started a loop before the scan interval with frequent loops off")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestRunnerCountsErrorsAndHealth(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	boom := NewLoopError(metrics.CloudProviderError, errors.New("boom"))
	transient := NewLoopError(metrics.TransientError, errors.New("conflict"))
	loop := &scriptedLoop{errs: []error{boom, transient, errors.New("unclassified")}, called: make(chan struct{}, 10)}
	r, h, reg := newTestRunner(loop, c, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	for i := 0; i < 3; i++ {
		waitCall(t, loop)
		for !c.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		if i < 2 {
			c.Step(10 * time.Second)
		}
	}
	got := func(typ string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("gathering: %v", err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "cluster_autoscaler_errors_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == typ {
					return m.GetCounter().GetValue()
				}
			}
		}
		return -1
	}
	for typ, want := range map[string]float64{"cloudProviderError": 1, "transientError": 0, "internalError": 1} {
		if v := got(typ); v != want {
			t.Errorf("errors_total{type=%q} = %v, want %v", typ, v, want)
		}
	}
	// The transient error counted as success: 16 minutes later the check
	// fails on max-failing-time measured from that loop, not from the start.
	c.Step(14 * time.Minute)
	h.UpdateLastActivity(c.Now())
	if err := h.Check(); err != nil {
		t.Errorf("unhealthy 14m after a transient error: %v", err)
	}
}

// panickyLoop panics in the loops whose index is in panicAt.
type panickyLoop struct {
	panicAt map[int]bool
	calls   int
}

func (l *panickyLoop) RunOnce(context.Context, time.Time) (Result, error) {
	i := l.calls
	l.calls++
	if l.panicAt[i] {
		var m map[string]int
		m["nil map"] = 1 //nolint:staticcheck // SA5000 on purpose: a real runtime panic, as a nil dereference in a plugin would be
	}
	return Result{Productive: true}, nil
}

func TestRunnerSurvivesAPanicAndStopsOnRepeatedOnes(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// Loop 0 panics, loop 1 succeeds (the streak resets), loops 2-4 panic.
	loop := &panickyLoop{panicAt: map[int]bool{0: true, 2: true, 3: true, 4: true, 5: true}}
	r, h, reg := newTestRunner(loop, c, true)
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	// A failed loop waits for the scan interval: step the clock past it
	// whenever the runner waits.
	var err error
	deadline := time.After(10 * time.Second)
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-deadline:
			t.Fatal("Run still running after repeated panics")
		case <-time.After(time.Millisecond):
			if c.HasWaiters() {
				c.Step(10 * time.Second)
			}
		}
	}
	if !errors.Is(err, ErrLoopPanicked) {
		t.Fatalf("Run returned %v, want ErrLoopPanicked", err)
	}
	if loop.calls != 5 {
		t.Errorf("loops run = %d, want 5 (one panic survived, then %d in a row)", loop.calls, MaxConsecutivePanics)
	}
	mfs, gerr := reg.Gather()
	if gerr != nil {
		t.Fatal(gerr)
	}
	internal := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "cluster_autoscaler_errors_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "internalError" {
					internal = m.GetCounter().GetValue()
				}
			}
		}
	}
	if internal != 4 {
		t.Errorf(`errors_total{type="internalError"} = %v, want 4`, internal)
	}
	// A panicking loop is not a successful one: loop 1 (the last success)
	// ran at most four scan intervals ago.
	c.Step(15 * time.Minute)
	if h.Check() == nil {
		t.Error("health check passes 16 minutes after the last successful loop")
	}
}

// stepWhenWaiting waits until the runner waits on the fake clock, then steps it.
func stepWhenWaiting(t *testing.T, c *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !c.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("runner does not wait on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	c.Step(d)
}

func expectNoCall(t *testing.T, l *scriptedLoop, why string) {
	t.Helper()
	select {
	case <-l.called:
		t.Fatal(why)
	case <-time.After(50 * time.Millisecond):
	}
}

func newBatchingRunner(loop Loop, c *clocktesting.FakeClock) *Runner {
	h := NewHealthCheck(c, 10*time.Minute, 15*time.Minute, 20*time.Minute)
	h.StartMonitoring()
	return NewRunner(loop, 10*time.Second, h, metrics.New(prometheus.NewRegistry()), WithClock(c),
		WithFrequentLoops(true), WithPodBatching(time.Second, 10*time.Second))
}

// TestRunnerBatchesPodTriggers: a loop asked for by new unschedulable pods
// starts once no new one arrived for the idle time, so a burst is one decision.
func TestRunnerBatchesPodTriggers(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	loop := &scriptedLoop{called: make(chan struct{}, 10)}
	r := newBatchingRunner(loop, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	waitCall(t, loop) // loop 1 at once

	for !c.HasWaiters() { // the runner waits for the scan interval
		time.Sleep(time.Millisecond)
	}
	t0 := c.Now()
	r.PodTrigger("deploy-a")
	stepWhenWaiting(t, c, 500*time.Millisecond)
	r.PodTrigger("deploy-b") // the burst goes on: the window is now t0+1.5s
	stepWhenWaiting(t, c, 300*time.Millisecond)
	r.PodTrigger("deploy-a") // a twin of a batched workload does not extend it
	stepWhenWaiting(t, c, 300*time.Millisecond)
	expectNoCall(t, loop, "loop ran 1.1s after the first trigger, 0.6s after the last")
	stepWhenWaiting(t, c, 400*time.Millisecond)
	waitCall(t, loop)
	if got := loop.calls[1].Sub(t0); got != 1500*time.Millisecond {
		t.Errorf("loop 2 started %v after the first trigger, want 1.5s (1s after the last)", got)
	}
	// The triggers were consumed by loop 2: no extra loop before the scan interval.
	stepWhenWaiting(t, c, 5*time.Second)
	expectNoCall(t, loop, "a spurious loop ran after the batch")
}

// TestRunnerBatchHasAMaximum: a trickle that never pauses still gets a loop
// after the maximum window.
func TestRunnerBatchHasAMaximum(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	loop := &scriptedLoop{called: make(chan struct{}, 10)}
	r := newBatchingRunner(loop, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	waitCall(t, loop)
	for !c.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	t0 := c.Now()
	r.PodTrigger("deploy")
	for i := 0; i < 25; i++ { // a new pod every 0.5s for 12.5s
		r.PodArrived("job", false)
		stepWhenWaiting(t, c, 500*time.Millisecond)
		if c.Now().Sub(t0) >= 10*time.Second {
			break
		}
		expectNoCall(t, loop, "loop ran inside the batching window")
	}
	waitCall(t, loop)
	if got := loop.calls[1].Sub(t0); got != 10*time.Second {
		t.Errorf("loop 2 started %v after the first trigger, want the 10s maximum", got)
	}
}

// TestRunnerPodArrivalsExtendOnlyAnOpenBatch: pods created while no pod is
// unschedulable start nothing; once one is, new pods keep the window open.
func TestRunnerPodArrivalsExtendOnlyAnOpenBatch(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	loop := &scriptedLoop{called: make(chan struct{}, 10)}
	r := newBatchingRunner(loop, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	waitCall(t, loop)
	for !c.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	r.PodArrived("deploy", true)
	stepWhenWaiting(t, c, 2*time.Second)
	expectNoCall(t, loop, "a pod arrival alone started a loop")
	t0 := c.Now()
	r.PodTrigger("deploy")
	stepWhenWaiting(t, c, 800*time.Millisecond)
	r.PodArrived("other", true) // the window is now t0+1.8s
	stepWhenWaiting(t, c, 800*time.Millisecond)
	expectNoCall(t, loop, "loop ran 0.8s after the last pod arrived")
	stepWhenWaiting(t, c, 200*time.Millisecond)
	waitCall(t, loop)
	if got := loop.calls[1].Sub(t0); got != 1800*time.Millisecond {
		t.Errorf("loop 2 started %v after the trigger, want 1.8s (1s after the last arrival)", got)
	}
}

// TestRunnerCountedArrivalsDoNotExtend: once a ReplicaSet is in the batch,
// its new pods do not extend the window (the loop counts the replicas it has
// still to create); a pod of another workload, or of a workload whose later
// pods are not counted, does.
func TestRunnerCountedArrivalsDoNotExtend(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	loop := &scriptedLoop{called: make(chan struct{}, 10)}
	r := newBatchingRunner(loop, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	waitCall(t, loop)
	for !c.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	t0 := c.Now()
	r.PodTrigger("rs")
	for i := 0; i < 4; i++ { // the ReplicaSet's pods keep coming every 0.2s
		stepWhenWaiting(t, c, 200*time.Millisecond)
		r.PodArrived("rs", true)
	}
	stepWhenWaiting(t, c, 200*time.Millisecond)
	waitCall(t, loop)
	if got := loop.calls[1].Sub(t0); got != time.Second {
		t.Errorf("loop 2 started %v after the trigger, want 1s: the counted ReplicaSet's pods extended the window", got)
	}

	for !c.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	t1 := c.Now()
	r.PodTrigger("rs")
	stepWhenWaiting(t, c, 500*time.Millisecond)
	r.PodArrived("job", true) // another workload: the window is now t1+1.5s
	stepWhenWaiting(t, c, 500*time.Millisecond)
	r.PodArrived("rs", false) // not counted whole: the window is now t1+2s
	stepWhenWaiting(t, c, 900*time.Millisecond)
	expectNoCall(t, loop, "loop ran 0.9s after an arrival that extends the window")
	stepWhenWaiting(t, c, 100*time.Millisecond)
	waitCall(t, loop)
	if got := loop.calls[2].Sub(t1); got != 2*time.Second {
		t.Errorf("loop 3 started %v after the trigger, want 2s (1s after the last extending arrival)", got)
	}
}

// TestRunnerWorksBetweenLoops: the between-loops work runs at the start of
// each wait with the wait's length, its time comes out of the wait (a 3 s
// collection does not delay the next loop), and it does not run between a
// productive loop and the one that follows at once.
func TestRunnerWorksBetweenLoops(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clocktesting.NewFakeClock(start)
	loop := &scriptedLoop{results: []Result{{}, {Productive: true}, {}}, called: make(chan struct{}, 10)}
	var mu sync.Mutex
	var waits []time.Duration
	h := NewHealthCheck(c, 10*time.Minute, 15*time.Minute, 20*time.Minute)
	r := NewRunner(loop, 10*time.Second, h, metrics.New(prometheus.NewRegistry()), WithClock(c), WithFrequentLoops(true),
		WithBetweenLoops(func(_ context.Context, wait time.Duration) {
			mu.Lock()
			waits = append(waits, wait)
			mu.Unlock()
			c.Step(3 * time.Second) // a collection
		}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	waitCall(t, loop) // loop 1
	stepWhenWaiting(t, c, 6*time.Second)
	expectNoCall(t, loop, "loop 2 ran before the scan interval")
	c.Step(time.Second)
	waitCall(t, loop) // loop 2, 10 s after loop 1, productive
	waitCall(t, loop) // loop 3 at once
	for !c.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []time.Time{start, start.Add(10 * time.Second), start.Add(10 * time.Second)}
	for i := range want {
		if !loop.calls[i].Equal(want[i]) {
			t.Errorf("call %d at %v, want %v", i+1, loop.calls[i], want[i])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 2 || waits[0] != 10*time.Second || waits[1] != 10*time.Second {
		t.Errorf("between-loops waits = %v, want two of 10s (after loops 1 and 3)", waits)
	}
}
