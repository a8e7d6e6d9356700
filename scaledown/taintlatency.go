package scaledown

import (
	"context"
	"sync"
	"time"

	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
)

// With --dynamic-node-delete-delay-after-taint-enabled the pause between
// tainting nodes and draining them is not the fixed
// --node-delete-delay-after-taint but twice the longest time seen in the
// last hour between writing a ToBeDeleted taint and this process's node
// informer showing it: the time the scheduler, which watches the same way,
// may still place a pod on the node. A fast control plane pauses for a few
// milliseconds, a slow one for as long as it needs.
const (
	// taintLatencyWindow is how long a measured latency counts.
	taintLatencyWindow = time.Hour
	// taintLatencyTimeout bounds the wait for the informer; a taint not
	// seen by then gives no sample, and the job pauses for the fixed delay.
	taintLatencyTimeout = time.Minute
	// taintLatencyPoll is how often the informer is looked at.
	taintLatencyPoll = 10 * time.Millisecond
	// taintLatencyFactor multiplies the longest latency.
	taintLatencyFactor = 2
)

// ActuatorOption configures an Actuator.
type ActuatorOption func(*Actuator)

// WithDynamicDeleteDelay turns on --dynamic-node-delete-delay-after-taint-enabled:
// nodes is the informer lister whose view of the taints is measured.
func WithDynamicDeleteDelay(nodes corelisters.NodeLister) ActuatorOption {
	return func(a *Actuator) { a.latency = &taintLatency{nodes: nodes, timeout: taintLatencyTimeout} }
}

type latencySample struct {
	at time.Time
	d  time.Duration
}

// taintLatency keeps the measured taint latencies of the last hour.
type taintLatency struct {
	nodes   corelisters.NodeLister
	timeout time.Duration

	mu      sync.Mutex
	samples []latencySample
}

// add records a latency seen at now and forgets samples older than the window.
func (t *taintLatency) add(now time.Time, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.samples = append(t.samples, latencySample{at: now, d: d})
	t.expire(now)
}

func (t *taintLatency) expire(now time.Time) {
	keep := t.samples[:0]
	for _, s := range t.samples {
		if now.Sub(s.at) <= taintLatencyWindow {
			keep = append(keep, s)
		}
	}
	t.samples = keep
}

// delay is the pause to take at now; ok is false with no sample in the window.
func (t *taintLatency) delay(now time.Time) (d time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(now)
	for _, s := range t.samples {
		d = max(d, s.d)
		ok = true
	}
	return taintLatencyFactor * d, ok
}

// deleteDelay is the pause after tainting the nodes in started (node name
// to when its taint write began): the fixed delay, or with the dynamic
// option twice the longest latency of the last hour, including the one
// measured now by waiting for the informer to show every new taint.
func (a *Actuator) deleteDelay(ctx context.Context, started map[string]time.Time) time.Duration {
	if a.latency == nil || len(started) == 0 {
		return a.opts.NodeDeleteDelayAfterTaint
	}
	logger := klog.FromContext(ctx)
	deadline := a.clock.Now().Add(a.latency.timeout)
	pending := make(map[string]time.Time, len(started))
	for n, at := range started {
		pending[n] = at
	}
	var longest time.Duration
	for len(pending) > 0 {
		now := a.clock.Now()
		for name, at := range pending {
			node, err := a.latency.nodes.Get(name)
			if err != nil {
				// Gone: nothing will be scheduled on it any more.
				delete(pending, name)
				continue
			}
			if hasTaint(node, ToBeDeletedTaint) {
				longest = max(longest, now.Sub(at))
				delete(pending, name)
			}
		}
		if len(pending) == 0 {
			break
		}
		if !now.Before(deadline) {
			logger.Info("Taints not seen by the node informer in time: pausing for --node-delete-delay-after-taint",
				"nodes", len(pending), "timeout", a.latency.timeout, "delay", a.opts.NodeDeleteDelayAfterTaint)
			return a.opts.NodeDeleteDelayAfterTaint
		}
		if !a.sleep(ctx, taintLatencyPoll) {
			return 0 // the caller sees ctx ended
		}
	}
	now := a.clock.Now()
	a.latency.add(now, longest)
	d, _ := a.latency.delay(now)
	logger.V(2).Info("Dynamic delay after tainting", "latency", longest, "delay", d)
	return d
}
