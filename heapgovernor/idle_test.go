package heapgovernor

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestShouldCollect(t *testing.T) {
	const mi = 1 << 20
	// 900 MiB live, goal 1,125 MiB: the runtime starts a collection at
	// 1,057.5 MiB at the earliest (70% of the 225 MiB room).
	at := func(heap uint64) HeapStats { return HeapStats{Goal: 1125 * mi, Live: 900 * mi, Heap: heap * mi} }
	for _, c := range []struct {
		name  string
		stats HeapStats
		next  uint64
		want  bool
	}{
		{"just collected: room for the next cycle", at(900), 50 * mi, false},
		{"the next cycle would cross the earliest start", at(1010), 50 * mi, true},
		{"the next cycle ends just short of it", at(1007), 50 * mi, false},
		{"already past it: the runtime's collection is about to start or under way", at(1060), 50 * mi, true},
		{"a cycle larger than the whole room: collect at once", at(900), 300 * mi, true},
		{"nothing learnt yet", at(1050), 0, false},
		{"nothing learnt yet, past it", at(1060), 0, true},
		{"no goal (collector off)", HeapStats{Live: 900 * mi, Heap: 1000 * mi}, 50 * mi, false},
		{"GOGC=off: a goal near 2^64", HeapStats{Goal: 1<<64 - 1, Live: 900 * mi, Heap: 1000 * mi}, 50 * mi, false},
		{"a goal at the live heap: no room to reason about", HeapStats{Goal: 900 * mi, Live: 900 * mi, Heap: 900 * mi}, 50 * mi, false},
	} {
		if got := shouldCollect(c.stats, c.next); got != c.want {
			t.Errorf("%s: shouldCollect = %v, want %v", c.name, got, c.want)
		}
	}
}

// fakeHeap is a heap the test allocates on by hand; its collections bring
// the heap back to the live part and take gcTime on the fake clock.
type fakeHeap struct {
	stats  HeapStats
	now    time.Time
	gcTime time.Duration
	gcs    int
}

func (h *fakeHeap) alloc(n uint64) { h.stats.Heap += n; h.stats.Allocs += n }
func (h *fakeHeap) gc()            { h.stats.Heap = h.stats.Live; h.now = h.now.Add(h.gcTime); h.gcs++ }

// TestIdleCollector runs cycles of 50 MiB on a heap of 900 MiB live with a
// goal of 1,125 MiB (the runtime would collect at 1,057.5 MiB at the
// earliest): the first wait follows the start-up's allocation, the
// following ones collect when the next 50 MiB would cross that point.
func TestIdleCollector(t *testing.T) {
	const mi = 1 << 20
	h := &fakeHeap{stats: HeapStats{Goal: 1125 * mi, Live: 900 * mi, Heap: 300 * mi, Allocs: 300 * mi},
		now: time.Unix(0, 0), gcTime: time.Second}
	c := newIdleCollector(func() HeapStats { return h.stats }, h.gc, func() time.Time { return h.now })
	ctx := context.Background()
	// Start-up: the caches fill and the first loop builds what later loops
	// keep, 700 MiB: collected in the first wait.
	h.alloc(700 * mi)
	var got []bool
	got = append(got, c.BetweenLoops(ctx, 9*time.Second))
	for range 8 {
		h.alloc(50 * mi)
		got = append(got, c.BetweenLoops(ctx, 9*time.Second))
	}
	// 900, 950, 1000, 1050 -> collect (the next would reach 1,100), ...
	want := []bool{true, false, false, true, false, false, true, false, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("collections per wait (-want +got):\n%s", diff)
	}
	// The start-up's 700 MiB is not remembered as a cycle: the heap at
	// 950 MiB is not collected.
	if len(c.cycles) != cyclesRemembered || c.cycles[0] != 50*mi {
		t.Errorf("cycles remembered = %v, want %d of 50 MiB", c.cycles, cyclesRemembered)
	}
	// No wait (the loop overran), the heap short of the runtime's start
	// (1,040 MiB, due with the next 50): left alone.
	h.alloc(40 * mi)
	if c.BetweenLoops(ctx, 0) {
		t.Errorf("collected with no wait, short of the runtime's start")
	}
	// No wait (the loop overran), but the heap is past the runtime's
	// earliest start: collected at once.
	h.alloc(20 * mi)
	if !c.BetweenLoops(ctx, -time.Second) {
		t.Errorf("no wait, the heap past the runtime's start: not collected")
	}
}

func TestIdleCollectorOffWithTheEnvironment(t *testing.T) {
	t.Setenv("GOGC", "200")
	if c := NewIdleCollector(); c != nil || c.BetweenLoops(context.Background(), 10*time.Second) {
		t.Errorf("GOGC in the environment: idle collector %v, want none that collects", c)
	}
	t.Setenv("GOGC", "")
	if NewIdleCollector() == nil {
		t.Errorf("no GOGC or GOMEMLIMIT: no idle collector")
	}
}
