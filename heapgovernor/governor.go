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
	"sync/atomic"

	"k8s.io/klog/v2"
)

// The heap governor bounds how far the Go heap grows past what is live, so
// that the process's memory follows the cluster's size instead of reaching
// twice it (Go's default, GOGC=100, lets the heap double before each
// collection). At 3,000 nodes and 90,000 pods that is the difference
// between about 450 and 700 MiB of RSS (docs/benchmarks.md, "Scale").
//
// After every collection it sets the runtime's soft memory limit to
//
//	the runtime's own (non-heap) memory + live heap + max(ratio x live heap, minHeadroom)
//
// which for a small heap is above GOGC's goal (so nothing changes there),
// and for a large one makes the collector run before the heap passes it.
// When the process runs in a cgroup with a memory limit, the soft limit
// never exceeds 90% of that limit, with or without the ratio, so that the
// collector works harder before the kernel kills the process (upstream's
// autoscaler is OOM-killed in that state: autoscaler#7873). An operator's
// GOMEMLIMIT or GOGC in the environment turns all of this off: the runtime
// then does as told.
//
// The limit is soft: the runtime never spends more than about half the CPU
// on collections to keep it, so a live heap that grows past it costs CPU for
// one cycle and raises the limit at the next.

const (
	// minHeadroom is the least room above the live heap: below 64 MiB of
	// live heap, GOGC=100's goal (twice the live heap) is the lower one.
	minHeadroom = 64 << 20
	// cgroupShare is the part of a cgroup's memory limit the soft limit
	// may take; the rest is for what the Go runtime does not account
	// (the binary's mapped pages, the kernel's buffers).
	cgroupShare = 0.9
)

// heapLimit computes the soft memory limit from a collection's figures:
// nonHeap is the runtime's memory outside heap spans, live the heap marked
// live by the collection, ceiling the cgroup-derived maximum (0: none).
// ratio 0 means the cgroup ceiling alone (math.MaxInt64 without one).
func heapLimit(nonHeap, live uint64, ratio float64, ceiling int64) int64 {
	limit := int64(math.MaxInt64)
	if ratio > 0 {
		room := max(uint64(ratio*float64(live)), minHeadroom)
		if l := nonHeap + live + room; l < math.MaxInt64 {
			limit = int64(l)
		}
	}
	if ceiling > 0 && ceiling < limit {
		limit = ceiling
	}
	return limit
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
	ratio   float64
	ceiling int64
	prev    int64
	stopped atomic.Bool
	samples []metrics.Sample
}

var governing atomic.Bool

// Start starts the governor unless the environment sets GOGC
// or GOMEMLIMIT, or another one runs; the returned stop restores the limit
// the runtime had.
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
	g := &heapGovernor{ratio: ratio, ceiling: ceiling, prev: debug.SetMemoryLimit(-1), samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}}
	logger.Info("Heap governor on", "headroomRatio", ratio, "cgroupCeilingBytes", ceiling)
	g.adjust()
	g.arm()
	return func() {
		if g.stopped.CompareAndSwap(false, true) {
			debug.SetMemoryLimit(g.prev)
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
		if g.stopped.Load() {
			return
		}
		g.adjust()
		g.arm()
	})
}

func (g *heapGovernor) adjust() {
	metrics.Read(g.samples)
	value := func(i int) uint64 {
		if g.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return g.samples[i].Value.Uint64()
	}
	live, total, released := value(0), value(1), value(2)
	heap := value(3) + value(4) + value(5)
	var nonHeap uint64
	if total > released+heap {
		nonHeap = total - released - heap
	}
	debug.SetMemoryLimit(heapLimit(nonHeap, live, g.ratio, g.ceiling))
}
