package heapgovernor

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// The heap governor bounds how far the Go heap grows past what is live, so
// that the process's memory follows the cluster's size instead of reaching
// twice it (Go's default, GOGC=100, lets the heap double before each
// collection). At 3,000 nodes and 90,000 pods that is the difference
// between about 450 and 700 MiB of RSS (docs/benchmarks.md, "Scale").
//
// After every collection it sets the collector's target percentage (what
// GOGC sets) so that the next collection starts once the heap has grown by
//
//	max(ratio x live heap, minHeadroom)
//
// past the live heap, and never later than GOGC=100 would (for a small heap
// the floor is above GOGC's goal, so nothing changes there). The room is
// counted in heap objects only: the heap's fragments and free pages, and
// the runtime's own memory, do not eat into it. (The governor used to set
// the soft memory limit to live + room + the runtime's other memory
// instead; the runtime counts every mapped page against that limit, so the
// room left for new objects was a fraction of the ratio, and at 15,000
// nodes the collector ran several times per loop: docs/benchmarks.md.)
//
// When the process runs in a cgroup with a memory limit, the soft memory
// limit is set to 90% of that limit, with or without the ratio, so that the
// collector works harder before the kernel kills the process (upstream's
// autoscaler is OOM-killed in that state: autoscaler#7873). An operator's
// GOMEMLIMIT or GOGC in the environment turns all of this off: the runtime
// then does as told.

const (
	// minHeadroom is the least room above the live heap: below 64 MiB of
	// live heap, GOGC=100's goal (twice the live heap) is the lower one.
	minHeadroom = 64 << 20
	// cgroupShare is the part of a cgroup's memory limit the soft limit
	// may take; the rest is for what the Go runtime does not account
	// (the binary's mapped pages, the kernel's buffers).
	cgroupShare = 0.9
	// defaultPercent is GOGC's default, the most room the governor gives.
	defaultPercent = 100
)

// gcPercent computes the collector's target percentage from a collection's
// live heap: the room max(ratio x live, minHeadroom) as a percentage of
// live, rounded up, at most defaultPercent. ratio 0 means defaultPercent.
func gcPercent(live uint64, ratio float64) int {
	if ratio <= 0 || live == 0 {
		return defaultPercent
	}
	room := max(ratio*float64(live), minHeadroom)
	pct := math.Ceil(100 * room / float64(live))
	if pct >= defaultPercent || math.IsNaN(pct) {
		return defaultPercent
	}
	return max(int(pct), 1)
}

// cgroupMemoryLimit reads the process's cgroup memory limit (v2's
// memory.max, or v1's memory.limit_in_bytes) under root (/sys/fs/cgroup),
// with the cgroup path from selfCgroup (/proc/self/cgroup's content); 0
// when there is none or it cannot be read.
func cgroupMemoryLimit(root, selfCgroup string) int64 {
	var candidates []string
	for _, line := range strings.Split(selfCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			candidates = append(candidates, filepath.Join(root, parts[2], "memory.max"))
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			candidates = append(candidates, filepath.Join(root, "memory", parts[2], "memory.limit_in_bytes"))
		}
	}
	// Inside a cgroup namespace (a container's usual view) the paths above
	// may not exist as written; the root holds the container's own files.
	candidates = append(candidates, filepath.Join(root, "memory.max"), filepath.Join(root, "memory", "memory.limit_in_bytes"))
	for _, p := range candidates {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 { // v1 reports "no limit" as a page-rounded MaxInt64
			return 0
		}
		return n
	}
	return 0
}

// heapGovernor is one running governor; at most one per process.
type heapGovernor struct {
	ratio       float64
	percent     int // the percentage last set
	prevPercent int
	prevLimit   int64
	mu          sync.Mutex // adjust and stop
	stopped     bool
	samples     []metrics.Sample
}

var governing atomic.Bool

// Start starts the governor unless the environment sets GOGC
// or GOMEMLIMIT, or another one runs; the returned stop restores the
// collector's percentage and the memory limit the runtime had.
func Start(logger klog.Logger, ratio float64) (stop func()) {
	if env := firstEnv("GOMEMLIMIT", "GOGC"); env != "" {
		logger.Info("Heap governor off: the environment sets the Go collector", "variable", env)
		return func() {}
	}
	if !governing.CompareAndSwap(false, true) {
		return func() {}
	}
	self, _ := os.ReadFile("/proc/self/cgroup")
	var ceiling int64
	if l := cgroupMemoryLimit("/sys/fs/cgroup", string(self)); l > 0 {
		ceiling = int64(cgroupShare * float64(l))
	}
	if ratio <= 0 && ceiling == 0 {
		governing.Store(false)
		return func() {}
	}
	g := &heapGovernor{ratio: ratio, prevLimit: debug.SetMemoryLimit(-1),
		samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	if ceiling > 0 {
		debug.SetMemoryLimit(ceiling)
	}
	logger.Info("Heap governor on", "headroomRatio", ratio, "cgroupCeilingBytes", ceiling)
	if ratio > 0 {
		g.prevPercent = debug.SetGCPercent(defaultPercent)
		g.percent = defaultPercent
		g.adjust()
		g.arm()
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.stopped {
			g.stopped = true
			if ratio > 0 {
				debug.SetGCPercent(g.prevPercent)
			}
			debug.SetMemoryLimit(g.prevLimit)
			governing.Store(false)
		}
	}
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if os.Getenv(n) != "" {
			return n
		}
	}
	return ""
}

// gcMark is garbage whose finalizer runs after the collection that found it
// unreachable: the governor's hook into each cycle.
type gcMark struct{ _ [16]byte }

func (g *heapGovernor) arm() {
	runtime.SetFinalizer(&gcMark{}, func(*gcMark) {
		if g.adjust() {
			g.arm()
		}
	})
}

// adjust sets the percentage from the last collection's live heap; false
// once the governor is stopped.
func (g *heapGovernor) adjust() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	metrics.Read(g.samples)
	var live uint64
	if g.samples[0].Value.Kind() == metrics.KindUint64 {
		live = g.samples[0].Value.Uint64()
	}
	if pct := gcPercent(live, g.ratio); pct != g.percent {
		debug.SetGCPercent(pct)
		g.percent = pct
	}
	return true
}
