package main

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/heapgovernor"
	"k8s.io/autoscaler/cluster-autoscaler/informercache"
	casmetrics "k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// BenchmarkLoop runs the real loop (core.Autoscaler.RunOnce as the binary
// wires it: processors, scale-up orchestrator, estimator, scale-down
// planner, status ConfigMap) in process, on informer caches filled by the
// benchmark, with no API server: the client is client-go's fake, which
// holds no node or pod. One op is one loop; p50-s and p99-s are over the
// timed loops, peak-heap-MiB the largest heap sampled every 10 ms while
// they ran, live-heap-MiB the heap after them and a GC (fixture included),
// cpu-s/loop the process's CPU time per timed loop (collector included,
// and the between-loops work after it); the binary's heap governor runs, at
// the default --heap-headroom-ratio, and the runner's between-loops work
// (the idle collector, builder.BetweenLoops) runs after each loop of Idle
// and ScaleDown2000, untimed, as the runner runs it at the start of its
// wait: the loops run back to back, the wait the scan interval would leave
// is passed on, and idle-gcs counts the collections it ran. Each loop's
// wall time is logged, marked where a collection ended during it.
//
// Sub-benchmarks: Idle (nothing to do: every node above the scale-down
// threshold, no pending pod), Burst10000 (10,000 unschedulable pods, half
// fit the room on existing nodes, half need group "new"; each op is a fresh
// loop after one untimed idle loop, so that the caches loops keep are
// warm) and ScaleDown2000 (2,000 nodes below the threshold whose pods fit
// elsewhere; --scale-down-non-empty-candidates-count=0 so that every loop
// simulates the drain of all 2,000, as a loop does at the default limits
// once they are all unneeded).
//
// Environment: LOOP_BENCH_NODES (default 15000) nodes of
// LOOP_BENCH_PODS_PER_NODE (default 30) pods: with fewer pods, each asks
// 30/n times as much (a node stays at 56%, above the scale-down threshold,
// so that Idle stays a loop with nothing to do);
// LOOP_BENCH_SNAPSHOT=<file> runs on a /snapshotz dump instead (Idle: the
// dump as it is; Burst10000: with the 10,000 pods added, without node
// selector; ScaleDown2000: the dump with the candidate limits lifted);
// LOOP_BENCH_FLAGS="--flag=value ..." adds flags to every loop;
// LOOP_BENCH_PENDING (default 10000) sets the burst's pending pods (the
// sub-benchmark is then Burst<n>), LOOP_BENCH_PENDING_SET (default 1000)
// the size of their ReplicaSets (each one equivalence group).
//
//	go test -run '^$' -bench BenchmarkLoop -benchtime 5x -benchmem ./cluster-autoscaler
func BenchmarkLoop(b *testing.B) {
	nodes := 15000
	if s := os.Getenv("LOOP_BENCH_NODES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("LOOP_BENCH_NODES=%q: want a positive number", s)
		}
		nodes = n
	}
	perNode := 30
	if s := os.Getenv("LOOP_BENCH_PODS_PER_NODE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("LOOP_BENCH_PODS_PER_NODE=%q: want a positive number", s)
		}
		perNode = n
	}
	dump := os.Getenv("LOOP_BENCH_SNAPSHOT")
	// The binary's heap governor, at --heap-headroom-ratio as the flags set
	// it (GOGC or GOMEMLIMIT in the environment turn it off, as in the
	// binary).
	cl := newCommandLine()
	if err := cl.parse(strings.Fields(os.Getenv("LOOP_BENCH_FLAGS"))); err != nil {
		b.Fatalf("LOOP_BENCH_FLAGS: %v", err)
	}
	defer heapgovernor.Start(klog.Background(), cl.opts.HeapHeadroomRatio)()
	cluster := func(b *testing.B, spec synthSpec) *loopCluster {
		var snap *core.DebuggingSnapshot
		if dump != "" {
			var err error
			if snap, err = readSnapshotFile(dump); err != nil {
				b.Fatal(err)
			}
			if spec.Pending > 0 {
				burst := syntheticCluster(synthSpec{Pending: spec.Pending, PendingPerSet: spec.PendingPerSet}).PendingPods
				for _, p := range burst {
					p.Spec.NodeSelector = nil
				}
				snap.PendingPods = append(snap.PendingPods, burst...)
			}
		} else {
			snap = syntheticCluster(spec)
			scaleWebPods(snap, 30, spec.PodsPerNode)
		}
		c, err := loopClusterOf(snap)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	lowNodes := min(2000, nodes/5)
	b.Run("Idle", func(b *testing.B) {
		h := newLoopHarness(b, cluster(b, synthSpec{Nodes: nodes, PodsPerNode: perNode}), nil)
		h.steadyLoops(b, nil)
	})
	pending := 10000
	if s := os.Getenv("LOOP_BENCH_PENDING"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("LOOP_BENCH_PENDING=%q: want a positive number", s)
		}
		pending = n
	}
	perSet := 0
	if s := os.Getenv("LOOP_BENCH_PENDING_SET"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("LOOP_BENCH_PENDING_SET=%q: want a positive number", s)
		}
		perSet = n
	}
	b.Run(fmt.Sprintf("Burst%d", pending), func(b *testing.B) {
		c := cluster(b, synthSpec{Nodes: nodes, PodsPerNode: perNode, Pending: pending, PendingPerSet: perSet})
		h := newLoopHarness(b, c, nil)
		h.burstLoops(b)
	})
	b.Run("ScaleDown2000", func(b *testing.B) {
		h := newLoopHarness(b, cluster(b, synthSpec{Nodes: nodes, PodsPerNode: perNode, LowNodes: lowNodes}),
			[]string{"--scale-down-non-empty-candidates-count=0"})
		h.steadyLoops(b, func(b *testing.B, a *core.Autoscaler, l *builder.Loop) {
			b.ReportMetric(float64(l.ScaleDown.Candidates("")), "unneeded")
		})
	})
	// ScaleDownChurn is ScaleDown2000 with pods of the busy nodes replaced
	// between loops (LOOP_BENCH_CHURN per loop, default 10; new objects, as
	// the informers deliver an update): scale-down keeps the outcomes of
	// the removals whose simulation read none of the changed nodes.
	churn := 10
	if s := os.Getenv("LOOP_BENCH_CHURN"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			b.Fatalf("LOOP_BENCH_CHURN=%q: want a number", s)
		}
		churn = n
	}
	b.Run("ScaleDownChurn", func(b *testing.B) {
		h := newLoopHarness(b, cluster(b, synthSpec{Nodes: nodes, PodsPerNode: perNode, LowNodes: lowNodes}),
			[]string{"--scale-down-non-empty-candidates-count=0"})
		h.churn = churnOf(h, churn, lowNodes)
		h.steadyLoops(b, func(b *testing.B, a *core.Autoscaler, l *builder.Loop) {
			b.ReportMetric(float64(l.ScaleDown.Candidates("")), "unneeded")
		})
	})
}

// churnOf returns what replaces n pods of the busy nodes (not the first
// low ones) with new objects in h's pod cache, a seeded random choice at
// each call.
func churnOf(h *loopHarness, n, low int) func(tb testing.TB) {
	if n == 0 {
		return nil
	}
	var busy []*apiv1.Pod
	lowNames := map[string]bool{}
	for i := 0; i < low; i++ {
		lowNames[fmt.Sprintf("node-%05d", i)] = true
	}
	for _, p := range h.cluster.Pods {
		if p.Spec.NodeName != "" && !lowNames[p.Spec.NodeName] {
			busy = append(busy, p)
		}
	}
	rng := rand.New(rand.NewSource(41))
	trim := informercache.NewTrimmer()
	store := h.factory.Core().V1().Pods().Informer().GetStore()
	version := 0
	return func(tb testing.TB) {
		for range n {
			version++
			p := busy[rng.Intn(len(busy))].DeepCopy()
			p.ResourceVersion = strconv.Itoa(version)
			obj, err := trim.Transform(p)
			if err == nil {
				err = store.Update(obj)
			}
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// scaleWebPods makes each scheduled "web" pod of a synthetic cluster of
// perNode pods per node ask as much as ref of them would (300m / 1 GiB
// each at ref): the nodes are as full as with ref pods.
func scaleWebPods(snap *core.DebuggingSnapshot, ref, perNode int) {
	if perNode == ref {
		return
	}
	cpu := resource.NewMilliQuantity(int64(300*ref/perNode), resource.DecimalSI)
	mem := resource.NewQuantity(int64(ref)*(1<<30)/int64(perNode), resource.BinarySI)
	for _, n := range snap.NodeList {
		for _, p := range n.Pods {
			if !strings.HasPrefix(p.Labels["app"], "web-") {
				continue
			}
			p.Spec.Containers[0].Resources.Requests = apiv1.ResourceList{apiv1.ResourceCPU: *cpu, apiv1.ResourceMemory: *mem}
		}
	}
}

// loopHarness is a loop's world: informer caches filled with a cluster, the
// benchmark's provider, and the options the loop is wired with.
type loopHarness struct {
	cluster  *loopCluster
	factory  informers.SharedInformerFactory
	provider *benchProvider
	opts     config.Options
	pending  []*apiv1.Pod
	// churn, when set, changes the caches between steady loops (untimed).
	churn func(tb testing.TB)
}

// newLoopHarness fills the caches with c, every pod through the cache
// transform the binary's informers use (trimming, shared parts). Flags are
// the defaults, --max-bulk-soft-taint-count=0 (the fake client holds no
// node to taint), then args, then LOOP_BENCH_FLAGS.
func newLoopHarness(tb testing.TB, c *loopCluster, args []string) *loopHarness {
	tb.Helper()
	cl := newCommandLine()
	all := append([]string{"--max-bulk-soft-taint-count=0"}, args...)
	all = append(all, strings.Fields(os.Getenv("LOOP_BENCH_FLAGS"))...)
	if err := cl.parse(all); err != nil {
		tb.Fatalf("flags %v: %v", all, err)
	}
	h := &loopHarness{cluster: c, factory: informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		provider: newBenchProvider(c), opts: cl.opts}
	trim := informercache.NewTrimmer()
	nodes := h.factory.Core().V1().Nodes().Informer().GetStore()
	for _, n := range c.Nodes {
		mustAdd(tb, nodes, trim, n)
	}
	pods := h.factory.Core().V1().Pods().Informer().GetStore()
	for _, p := range c.Pods {
		if p.Spec.NodeName == "" {
			h.pending = append(h.pending, p)
		}
		mustAdd(tb, pods, trim, p)
	}
	rss := h.factory.Apps().V1().ReplicaSets().Informer().GetStore()
	for _, rs := range c.ReplicaSets {
		mustAdd(tb, rss, trim, rs)
	}
	runtime.GC()
	return h
}

func mustAdd(tb testing.TB, store cache.Store, trim *informercache.Trimmer, obj any) {
	obj, err := trim.Transform(obj)
	if err == nil {
		err = store.Add(obj)
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// loop wires a fresh loop on the harness's caches with the builder, as the
// binary does (but the provider, the events sink and the API server: the
// client is the fake, ProvisioningRequests and buffers are off), with extra
// options after the builder's. release undoes the wiring; the test's
// cleanup does it too.
func (h *loopHarness) loop(tb testing.TB, ctx context.Context, extra ...core.AutoscalerOption) (a *core.Autoscaler, l *builder.Loop, release func()) {
	tb.Helper()
	stack := &builder.Stack{}
	m := casmetrics.New(prometheus.NewRegistry())
	inf := &builder.Informers{Factory: h.factory,
		Listers: core.Listers{Nodes: h.factory.Core().V1().Nodes().Lister(), Pods: h.factory.Core().V1().Pods().Lister()}}
	l, _, err := builder.NewLoop(ctx, ctx, builder.Inputs{Opts: h.opts, Client: benchClient(), Metrics: m,
		Informers: inf, Provider: h.provider, Recorder: &record.FakeRecorder{}}, stack)
	if err != nil {
		stack.Unwind()
		tb.Fatal(err)
	}
	held := stack // released, so that a loop the benchmark is done with is garbage
	release = func() {
		if held != nil {
			held.Unwind()
			held = nil
		}
	}
	tb.Cleanup(release)
	return core.NewAutoscaler(builder.CoreOptions(h.opts), inf.Listers, h.provider, m, append(l.Options, extra...)...), l, release
}

// benchClient is the loops' client: client-go's fake, with the ConfigMaps
// (the status ConfigMap, written every loop) in client-go's plain object
// tracker. The fake's own tracker manages fields, and builds a REST mapper
// of every built-in type at each write (about 2 ms of CPU a loop on the
// development machine, most of the write), which no call to an API server
// costs the autoscaler.
func benchClient() *fake.Clientset {
	c := fake.NewClientset()
	cms := k8stesting.NewObjectTracker(clientgoscheme.Scheme, clientgoscheme.Codecs.UniversalDecoder())
	c.PrependReactor("*", "configmaps", k8stesting.ObjectReaction(cms))
	return c
}

// benchNow is the loops' clock: an hour after the fixture's objects were
// created, 10 s further for each loop.
var benchStart = time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)

// steadyLoops times b.N loops of one autoscaler after an untimed first loop.
// The loops are back to back, but the runner's between-loops work
// (builder.BetweenLoops: the idle collector) runs after each one, untimed,
// as the binary's runner runs it at the start of each wait, with the wait
// the scan interval would leave; its CPU time is counted in cpu-s/loop, and
// idle-gcs counts the collections it ran.
func (h *loopHarness) steadyLoops(b *testing.B, after func(*testing.B, *core.Autoscaler, *builder.Loop)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, l, release := h.loop(b, ctx)
	defer release()
	between := builder.BetweenLoops()
	start := time.Now()
	runLoop(b, ctx, a, benchStart)
	between(ctx, h.opts.ScanInterval-time.Since(start))
	var times []time.Duration
	var cpu time.Duration
	var gcs []bool
	heap := startHeapSampler()
	forced := gcCycles("/gc/cycles/forced:gc-cycles")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		cycles := gcCycles("/gc/cycles/total:gc-cycles")
		start, startCPU := time.Now(), processCPU()
		runLoop(b, ctx, a, benchStart.Add(time.Duration(i+1)*10*time.Second))
		took := time.Since(start)
		times, gcs = append(times, took), append(gcs, gcCycles("/gc/cycles/total:gc-cycles") != cycles)
		b.StopTimer()
		between(ctx, h.opts.ScanInterval-took)
		cpu += processCPU() - startCPU
		if h.churn != nil {
			h.churn(b)
		}
		b.StartTimer()
	}
	b.StopTimer()
	logLoops(b, times, gcs)
	b.ReportMetric(float64(gcCycles("/gc/cycles/forced:gc-cycles")-forced), "idle-gcs")
	reportLoops(b, times, cpu, heap.stop())
	if after != nil {
		after(b, a, l)
	}
	runtime.KeepAlive(h)
}

// logLoops logs each timed loop's wall time, in order, marked with a * when
// a collection ended during it: the slow loops and the collections line up.
func logLoops(b *testing.B, times []time.Duration, gcs []bool) {
	var sb strings.Builder
	for i, t := range times {
		fmt.Fprintf(&sb, " %d", t.Milliseconds())
		if gcs[i] {
			sb.WriteString("*")
		}
	}
	b.Logf("loops (ms, in order; * a collection ended during it):%s", sb.String())
}

func gcCycles(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// burstLoops times b.N burst loops, each on a fresh autoscaler whose first
// (untimed) loop saw no pending pod.
func (h *loopHarness) burstLoops(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pods := h.factory.Core().V1().Pods().Informer().GetStore()
	var times []time.Duration
	var cpu time.Duration
	var heap *heapSampler
	added := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for _, p := range h.pending {
			if err := pods.Delete(p); err != nil {
				b.Fatal(err)
			}
		}
		provider := newBenchProvider(h.cluster)
		h.provider = provider
		a, _, release := h.loop(b, ctx)
		runLoop(b, ctx, a, benchStart)
		for _, p := range h.pending {
			if err := pods.Add(p); err != nil {
				b.Fatal(err)
			}
		}
		if heap == nil {
			heap = startHeapSampler()
		}
		b.StartTimer()
		start, startCPU := time.Now(), processCPU()
		runLoop(b, ctx, a, benchStart.Add(10*time.Second))
		times, cpu = append(times, time.Since(start)), cpu+processCPU()-startCPU
		b.StopTimer()
		added = 0
		for _, g := range h.cluster.Groups {
			added += provider.target(g.ID) - len(g.Nodes)
		}
		// The next op's loop is a new one: this one's memory goes first.
		release()
		a = nil //nolint:ineffassign // drops the loop before the collection below, whatever the compiler proves
		runtime.GC()
		b.StartTimer()
	}
	b.StopTimer()
	reportLoops(b, times, cpu, heap.stop())
	b.ReportMetric(float64(added), "nodes-added")
	runtime.KeepAlive(h) // live-heap-MiB: the fixture, not the loop (released)
}

func runLoop(b *testing.B, ctx context.Context, a *core.Autoscaler, now time.Time) {
	if _, err := a.RunOnce(ctx, now); err != nil {
		b.Fatalf("loop at %v: %v", now, err)
	}
}

// processCPU is the CPU time (user and system) the process used so far, the
// collector's included: on a shared machine a loop's CPU time says more
// than its wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportLoops(b *testing.B, times []time.Duration, cpu time.Duration, peak uint64) {
	if len(times) > 0 {
		b.ReportMetric(cpu.Seconds()/float64(len(times)), "cpu-s/loop")
	}
	slices.Sort(times)
	b.ReportMetric(quantile(times, 0.5).Seconds(), "p50-s")
	b.ReportMetric(quantile(times, 0.99).Seconds(), "p99-s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	b.ReportMetric(float64(sample[0].Value.Uint64())/(1<<20), "live-heap-MiB")
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// heapSampler records the largest heap (objects, live or not yet swept)
// seen every 10 ms.
type heapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			s.peak = max(s.peak, sample[0].Value.Uint64())
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) stop() uint64 {
	if s == nil {
		return 0
	}
	close(s.done)
	s.wg.Wait()
	return s.peak
}
