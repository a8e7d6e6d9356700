package heapgovernor

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// The loop runs every scan interval and, at a large cluster, the collector's
// marking of the live heap (mostly the informers' objects) takes longer than
// a quiet loop: a loop during which a collection runs is the slowest one,
// stretched by mark assists and by the collector's use of every core. The
// loop's own garbage is what triggers that collection, but nothing ties it
// to happen during a loop: the idle collector starts it in the wait between
// two loops instead, when the next cycle's allocation would otherwise cross
// the point where the runtime starts one. It only ever collects earlier than
// the runtime would, so it never raises the heap; the price is some extra
// collector CPU in the wait (the heap's room is not all used before each
// collection).

// HeapStats is what the idle collector reads of the runtime.
type HeapStats struct {
	// Goal is the heap size the runtime's collector aims to finish at
	// (/gc/heap/goal:bytes).
	Goal uint64
	// Live is the heap the last collection marked (/gc/heap/live:bytes).
	Live uint64
	// Heap is the heap's objects now, live or not yet swept
	// (/memory/classes/heap/objects:bytes).
	Heap uint64
	// Allocs counts every byte allocated on the heap so far
	// (/gc/heap/allocs:bytes).
	Allocs uint64
}

// ReadHeapStats reads HeapStats from runtime/metrics.
func ReadHeapStats() HeapStats {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return HeapStats{Goal: v(0), Live: v(1), Heap: v(2), Allocs: v(3)}
}

const (
	// earliestTrigger is the least share of the room between the live heap
	// and the goal that the runtime lets the heap use before it starts a
	// collection (its pacer starts one between 70% and 95% of the way,
	// earlier when the last mark took long). The idle collector counts
	// with the earliest.
	earliestTrigger = 0.7
	// cyclesRemembered is how many recent cycles' allocation the estimate
	// of the next one takes the largest of.
	cyclesRemembered = 5
)

// shouldCollect says whether a collection is due before the next cycle: when
// the heap plus next, the allocation expected before the following wait,
// reaches the earliest point at which the runtime would start a collection
// on its own (then during the loop), or the heap is past it already (the
// runtime's collection is about to start or under way: runtime.GC finishes
// it in the wait, and runs one more). No goal above the live heap (the
// collector off, or nothing to reason about) returns false.
func shouldCollect(s HeapStats, next uint64) bool {
	if s.Goal <= s.Live {
		return false
	}
	// In floating point: with GOGC=off the goal is near 2^64.
	trigger := float64(s.Live) + earliestTrigger*float64(s.Goal-s.Live)
	return float64(s.Heap)+float64(next) >= trigger
}

// IdleCollector runs the collector between loops (BetweenLoops), when the
// next loop would otherwise run one.
type IdleCollector struct {
	read func() HeapStats
	gc   func()
	now  func() time.Time

	mu sync.Mutex
	// lastAllocs is Allocs at the last call, or at the collector's making.
	lastAllocs uint64
	// started: the first call is past. The first cycle (from the
	// collector's making, before the informers' caches fill, to the end of
	// the first loop, which builds what later loops keep) is no later
	// loop's measure: it decides the first wait only.
	started bool
	// cycles holds the allocation of the last cycles (a loop and its wait),
	// newest last.
	cycles []uint64
}

// NewIdleCollector is an idle collector on the runtime: ReadHeapStats,
// runtime.GC and the wall clock. GOGC or GOMEMLIMIT in the environment turn
// it off, as they turn the governor off: it returns nil, whose BetweenLoops
// does nothing.
func NewIdleCollector() *IdleCollector {
	if firstEnv("GOMEMLIMIT", "GOGC") != "" {
		return nil
	}
	return newIdleCollector(ReadHeapStats, runtime.GC, time.Now)
}

func newIdleCollector(read func() HeapStats, gc func(), now func() time.Time) *IdleCollector {
	return &IdleCollector{read: read, gc: gc, now: now, lastAllocs: read().Allocs}
}

// BetweenLoops is called once per wait between two loops, at its start,
// with how long the wait is to be: it learns what the last cycle allocated
// and, when the next cycle's allocation (the largest of the recent ones;
// after the first loop, what was allocated since the collector was made)
// would start a collection during the next loop, runs one now. It returns
// whether it collected. It blocks while it collects (a few hundred
// milliseconds to seconds at 15,000 nodes), and the runner's timer counts
// from the loop's start, so a collection longer than the wait delays the
// next loop by the difference (that loop would have run with the same
// collection). When there is no wait (the loop overran its interval) it
// collects only if the heap is already where the runtime starts one.
func (c *IdleCollector) BetweenLoops(ctx context.Context, wait time.Duration) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.read()
	var next uint64
	switch {
	case s.Allocs < c.lastAllocs: // not the runtime's counter
	case !c.started:
		next = s.Allocs - c.lastAllocs
	default:
		c.cycles = append(c.cycles, s.Allocs-c.lastAllocs)
		if len(c.cycles) > cyclesRemembered {
			c.cycles = c.cycles[len(c.cycles)-cyclesRemembered:]
		}
	}
	c.started = true
	c.lastAllocs = s.Allocs
	for _, a := range c.cycles {
		next = max(next, a)
	}
	if !shouldCollect(s, next) {
		return false
	}
	if wait <= 0 && !shouldCollect(s, 0) {
		// The loop overran its interval (the first one does, at a large
		// cluster): the next starts at once, and is held back only for a
		// collection the runtime would start now anyway.
		return false
	}
	start := c.now()
	c.gc()
	took := c.now().Sub(start)
	// The collection's own allocation (none to speak of) is not the
	// next cycle's.
	c.lastAllocs = c.read().Allocs
	klog.FromContext(ctx).V(4).Info("Collected the heap between loops", "heapBytes", s.Heap, "liveBytes", s.Live,
		"goalBytes", s.Goal, "expectedCycleAllocBytes", next, "took", took)
	return true
}
