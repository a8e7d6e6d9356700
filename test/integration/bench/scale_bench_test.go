package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// BenchmarkScale: the real binary on a control plane of its own holding N
// kwok nodes (16 CPU, 64 GiB) that run 30 pods each (250m, 1 GiB: 47% of
// a node, so every node is a scale-down candidate), owned by ReplicaSets of
// 300 replicas. Measured with the autoscaler at its default flags but for
// the client rate (--kube-client-qps=200, --kube-client-burst=400: the kwok
// provider writes its Nodes through that client, where a cloud's instances
// would not count against it), --v=2 and --profiling:
//
//   - over a window of steady state (SCALE_WINDOW, default 5m): the duration
//     of each loop (p50, p90, p99, max; from the growth of
//     function_duration_seconds{function="main"}), the API requests per loop
//     (client-go's rest_client_requests_total) and the CPU per loop;
//   - then a Deployment of 1,000 pods (1 CPU, 2 GiB) that only a second,
//     empty group (8 CPU nodes) can hold: the time from its creation to all
//     1,000 Running;
//   - the peak RSS (VmHWM) of the process over all of it.
//
// nodes=100 is a quick check of the benchmark itself. Each size takes a few
// minutes to set up (nodes=3000: about 90,000 pods to create):
//
//	go test -run xxx -bench 'Scale/nodes=1000$' -benchtime 1x -timeout 60m ./test/integration/bench
//
// SCALE_CPU_PROFILE=<file> writes a CPU profile of the binary over 60 s of
// the window, SCALE_HEAP_PROFILE=<file> a heap profile at its end,
// SCALE_BURST_CPU_PROFILE=<file> a CPU profile over the burst's first 30 s;
// SCALE_LOG=<file> keeps the measured autoscaler's log; SCALE_NODES=<n> runs
// that size only; SCALE_GOMEMLIMIT=<limit> then measures another window
// with the binary restarted with GOMEMLIMIT=<limit> (e.g. 450MiB), and
// SCALE_HEADROOM_RATIOS=<r>,... one more window per --heap-headroom-ratio.
func BenchmarkScale(b *testing.B) {
	sizes := []int{100, 1000, 3000}
	if v := os.Getenv("SCALE_NODES"); v != "" { // another size, alone
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			b.Fatalf("SCALE_NODES=%q: want a number of nodes of at least 10", v)
		}
		sizes = []int{n}
	}
	for _, nodes := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchScale(b, nodes)
			}
		})
	}
}

const (
	scalePodsPerNode     = 30
	scalePodsPerWorkload = 300
	scaleBurstPods       = 1000
	// notYetPriorityClass does not exist: the pods of a ReplicaSet whose
	// template names it are refused, so the ReplicaSet controller creates
	// none while the benchmark creates them bound to their nodes.
	notYetPriorityClass = "scale-bench-not-created"
	// presetStatusLabel marks the steady state's pods, whose Running status
	// the benchmark writes itself rather than leave 90,000 of them to kwok.
	presetStatusLabel = "scale.test/preset-status"
)

func benchScale(b *testing.B, nodes int) {
	b.StopTimer()
	window := 5 * time.Minute
	if v := os.Getenv("SCALE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("SCALE_WINDOW: %v", err)
		}
		window = d
	}
	e := framework.NewCluster(b, framework.ClusterOptions{NodeLeaseSeconds: 240, KwokParallelism: 16,
		KwokIgnorePodLabel: presetStatusLabel})
	base, burst := "base", "burst"
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
createQPS: 1000
workers: 32
nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: %[3]d
  initialSize: %[3]d
  template:
    labels: {pool: %[1]s}
    capacity: {cpu: "16", memory: 64Gi, pods: "110"}
- name: %[2]s
  minSize: 0
  maxSize: 200
  template:
    labels: {pool: %[2]s}
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
`, base, burst, nodes))
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--kube-client-qps=200", "--kube-client-burst=400"}

	// Steady state: the kwok provider creates the nodes (initialSize) in a
	// first run of the binary; the pods are created bound to them.
	setupStart := time.Now()
	setup := itest.StartAutoscaler(b, "setup", append(args, "--scale-down-enabled=false", "--kube-client-qps=2000",
		"--kube-client-burst=4000")...)
	names := waitNodesReady(b, e, base, nodes, 10*time.Minute)
	if code := setup.Terminate(time.Minute); code != 0 {
		b.Logf("setup autoscaler exited with %d", code)
	}
	readySeconds := time.Since(setupStart).Seconds()
	createSeconds := createScaleWorkloads(b, e, names)
	waitPodsRunning(b, e, e.Namespace, 30*time.Minute)
	setupSeconds := time.Since(setupStart).Seconds()
	// Benchmark logs past 10 lines are cut without -v: a few long lines.
	b.Logf("setup: %d nodes Ready in %.0fs, %d pods created Running in %.0fs more, steady state in %.0fs; load average %s",
		nodes, readySeconds, nodes*scalePodsPerNode, createSeconds, setupSeconds, loadAverage())

	// The measured run.
	p := itest.StartAutoscaler(b, "autoscaler", append(args, "--v=2", "--profiling")...)
	defer func() {
		if path := os.Getenv("SCALE_LOG"); path != "" {
			_ = os.WriteFile(path, []byte(p.Log.String()), 0o600)
		}
	}()
	e.Eventually(5*time.Minute, "the first loop", func(ctx context.Context) (bool, error) {
		v, err := itest.ScrapeValues(ctx, p)
		return err == nil && v[mainCount] >= 1, nil
	})
	first, err := itest.ScrapeValues(e.Context(), p)
	if err != nil {
		b.Fatal(err)
	}
	firstLoop := first[mainSum] / first[mainCount]
	loadStart := loadAverage()
	cpuStart := cpuSeconds(p)
	s := startLoopSampler(b, p)
	if out := os.Getenv("SCALE_CPU_PROFILE"); out != "" && window >= 70*time.Second {
		time.Sleep(5 * time.Second)
		_, profile, err := p.Get(e.Context(), "/debug/pprof/profile?seconds=60")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(out, []byte(profile), 0o600); err != nil {
			b.Fatal(err)
		}
		time.Sleep(window - 65*time.Second)
	} else {
		time.Sleep(window)
	}
	s.close()
	steady := s.figures()
	cpuSteady := cpuSeconds(p) - cpuStart
	loadEnd := loadAverage()
	if len(steady.loops) == 0 {
		b.Fatalf("no loop ended in the %v window", window)
	}
	endState := fmt.Sprintf("unneeded nodes %.0f, RSS %.0f MiB (VmHWM %.0f MiB), Go heap in use %.0f MiB, next GC at %.0f MiB, %.0f goroutines",
		itest.SumOf(s.last, "cluster_autoscaler_unneeded_nodes_count"), procStatusMiB(p.Cmd.Process.Pid, "VmRSS"), peakRSSMiB(p),
		itest.SumOf(s.last, "go_memstats_heap_inuse_bytes")/(1<<20), itest.SumOf(s.last, "go_memstats_next_gc_bytes")/(1<<20),
		itest.SumOf(s.last, "go_goroutines"))
	if out := os.Getenv("SCALE_HEAP_PROFILE"); out != "" {
		_, profile, err := p.Get(e.Context(), "/debug/pprof/heap")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(out, []byte(profile), 0o600); err != nil {
			b.Fatal(err)
		}
	}

	// 1,000 pending pods that need new nodes.
	bn := burstNamespace(b, e)
	w := watchPods(b, bn)
	bs := startLoopSampler(b, p)
	decisionsBefore := strings.Count(p.Log.String(), "\"Scaled up node group\"")
	b.StartTimer()
	start := time.Now()
	itest.Deployment(bn, "burst", scaleBurstPods, map[string]string{"pool": burst})
	profiled := make(chan struct{})
	go func() { // a CPU profile of the binary over the burst's first 30 s
		defer close(profiled)
		if out := os.Getenv("SCALE_BURST_CPU_PROFILE"); out != "" {
			if _, profile, err := p.Get(context.Background(), "/debug/pprof/profile?seconds=30"); err == nil {
				_ = os.WriteFile(out, []byte(profile), 0o600)
			}
		}
	}()
	defer func() { <-profiled }()
	bn.Eventually(15*time.Minute, "the burst's pods Running", func(context.Context) (bool, error) {
		return w.running() == scaleBurstPods, nil
	})
	b.StopTimer()
	burstSeconds := time.Since(start).Seconds()
	bs.close()
	burstLoops := bs.figures()

	f := steady
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(setupSeconds, "s-setup")
	b.ReportMetric(firstLoop, "s-first-loop")
	b.ReportMetric(float64(len(f.loops)), "loops")
	b.ReportMetric(percentile(f.loops, 0.5), "s-loop-p50")
	b.ReportMetric(percentile(f.loops, 0.9), "s-loop-p90")
	b.ReportMetric(percentile(f.loops, 0.99), "s-loop-p99")
	b.ReportMetric(percentile(f.loops, 1), "s-loop-max")
	b.ReportMetric(f.requests/float64(len(f.loops)), "API-calls/loop")
	b.ReportMetric(cpuSteady/float64(len(f.loops)), "CPU-s/loop")
	b.ReportMetric(f.gcs/float64(len(f.loops)), "GCs/loop")
	b.ReportMetric(burstSeconds, "s-burst-to-all-running")
	if len(burstLoops.loops) > 0 {
		b.ReportMetric(percentile(burstLoops.loops, 1), "s-burst-loop-max")
	}
	b.ReportMetric(float64(len(poolNodeNames(b, e, burst))), "burst-nodes")
	b.ReportMetric(float64(strings.Count(p.Log.String(), "\"Scaled up node group\"")-decisionsBefore), "burst-decisions")
	b.ReportMetric(peakRSSMiB(p), "peak-RSS-MiB")
	b.ReportMetric(load1(), "loadavg-1m-end")

	fns := make([]string, 0, len(f.functionMeans))
	for fn := range f.functionMeans {
		fns = append(fns, fn)
	}
	sort.Strings(fns)
	var means []string
	for _, fn := range fns {
		means = append(means, fmt.Sprintf("%s=%.3fs", fn, f.functionMeans[fn]))
	}
	b.Logf("window %v: %d loops (%d timed as a mean of several), load average %s at the start and %s at the end; at its end: %s",
		window, len(f.loops), f.inexact, loadStart, loadEnd, endState)
	b.Logf("loop seconds: %v", roundAll(f.loops))
	b.Logf("mean seconds per run of each function: %s", strings.Join(means, " "))
	b.Logf("API requests in the window: %.0f (%v), %.1f per loop", f.requests, f.requestsBy, f.requests/float64(len(f.loops)))
	b.Logf("burst: %d pods Running after %.1fs, %d loops %v; load average %s", scaleBurstPods, burstSeconds,
		len(burstLoops.loops), roundAll(burstLoops.loops), loadAverage())
	if limit := os.Getenv("SCALE_GOMEMLIMIT"); limit != "" {
		p = benchScaleVariant(b, e, p, []string{"GOMEMLIMIT=" + limit}, args, "memlimit", window)
	}
	if ratios := os.Getenv("SCALE_HEADROOM_RATIOS"); ratios != "" {
		for _, r := range strings.Split(ratios, ",") {
			if _, err := strconv.ParseFloat(r, 64); err != nil {
				b.Fatalf("SCALE_HEADROOM_RATIOS=%q: %q is not a number", ratios, r)
			}
			p = benchScaleVariant(b, e, p, nil, append(slices.Clone(args), "--heap-headroom-ratio="+r),
				"headroom"+r, window)
		}
	}
}

// benchScaleVariant replaces the measured autoscaler p by one with env
// added to its environment (GOMEMLIMIT=<limit>: the Go runtime's soft
// memory limit) and args, and measures a steady window of it: loop
// percentiles, CPU per loop, peak RSS, reported with the label as prefix.
// It returns the new process, which the next variant replaces in turn.
func benchScaleVariant(b *testing.B, e *framework.Env, p *itest.AutoscalerProcess, env, args []string, label string,
	window time.Duration) *itest.AutoscalerProcess {
	if code := p.Terminate(time.Minute); code != 0 {
		b.Logf("the autoscaler before %s exited with %d", label, code)
	}
	q := itest.StartAutoscalerEnv(b, env, "autoscaler-"+label, append(args, "--v=2")...)
	e.Eventually(5*time.Minute, "the first loop of "+label, func(ctx context.Context) (bool, error) {
		v, err := itest.ScrapeValues(ctx, q)
		return err == nil && v[mainCount] >= 1, nil
	})
	cpuStart, loadStart := cpuSeconds(q), loadAverage()
	s := startLoopSampler(b, q)
	time.Sleep(window)
	s.close()
	f := s.figures()
	if len(f.loops) == 0 {
		b.Fatalf("%s: no loop ended in the %v window", label, window)
	}
	n := float64(len(f.loops))
	b.ReportMetric(percentile(f.loops, 0.5), label+"-s-loop-p50")
	b.ReportMetric(percentile(f.loops, 0.9), label+"-s-loop-p90")
	b.ReportMetric(percentile(f.loops, 0.99), label+"-s-loop-p99")
	b.ReportMetric((cpuSeconds(q)-cpuStart)/n, label+"-CPU-s/loop")
	b.ReportMetric(f.gcs/n, label+"-GCs/loop")
	b.ReportMetric(peakRSSMiB(q), label+"-peak-RSS-MiB")
	b.Logf("%s (env %v, args %v): %d loops %v; RSS %.0f MiB (VmHWM %.0f MiB), heap in use %.0f MiB; load average %s at the start and %s at the end",
		label, env, args[len(args)-1], len(f.loops), roundAll(f.loops), procStatusMiB(q.Cmd.Process.Pid, "VmRSS"), peakRSSMiB(q),
		itest.SumOf(s.last, "go_memstats_heap_inuse_bytes")/(1<<20), loadStart, loadAverage())
	return q
}

func roundAll(v []float64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return out
}

// burstNamespace is a second namespace, so that watching the burst's pods
// does not mean watching the steady state's.
func burstNamespace(b *testing.B, e *framework.Env) *framework.Env {
	b.Helper()
	bn := *e
	bn.Namespace = e.Namespace + "-burst"
	ns := &apiv1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bn.Namespace}}
	if _, err := e.Client.CoreV1().Namespaces().Create(e.Context(), ns, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return &bn
}

// poolNodeNames lists the names of the pool's nodes.
func poolNodeNames(b *testing.B, e *framework.Env, pool string) []string {
	b.Helper()
	list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, len(list.Items))
	for i, n := range list.Items {
		names[i] = n.Name
	}
	return names
}

// waitNodesReady waits for want Ready nodes of the pool, without the
// not-ready taint, and returns their names in order.
func waitNodesReady(b *testing.B, e *framework.Env, pool string, want int, timeout time.Duration) []string {
	b.Helper()
	var names []string
	deadline := time.Now().Add(timeout)
	for {
		list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + pool})
		if err != nil {
			b.Fatal(err)
		}
		names = names[:0]
		for _, n := range list.Items {
			if itest.NodeReady(&n) && !itest.HasTaintKey(&n, "node.kubernetes.io/not-ready") {
				names = append(names, n.Name)
			}
		}
		if len(names) >= want {
			sort.Strings(names)
			return names
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d nodes of %s Ready after %v", len(names), want, pool, timeout)
		}
		time.Sleep(3 * time.Second)
	}
}

// createScaleWorkloads puts 30 pods on each node: ReplicaSets of 300
// replicas, pod i of the whole set on node i mod len(nodes), so that each
// node runs one pod of 30 different ReplicaSets. Each ReplicaSet is created
// first (its pods must name its UID) with a template the API server refuses
// (a missing PriorityClass), so that the ReplicaSet controller adds no pod of
// its own; its pods are created bound to their nodes with 64 writers, each
// pod then given the Running status a kubelet would write (kwok is told to
// leave these pods alone: 90,000 status patches take it a quarter of an
// hour here, and its backlog went on loading the machine after); then the
// template is made valid. The controller sees as many pods as replicas
// and leaves them be; to the autoscaler they are ordinary ReplicaSet pods.
func createScaleWorkloads(b *testing.B, e *framework.Env, nodes []string) (seconds float64) {
	b.Helper()
	cfg := *e.Config
	cfg.QPS, cfg.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := e.Context()
	total := len(nodes) * scalePodsPerNode
	workloads := (total + scalePodsPerWorkload - 1) / scalePodsPerWorkload
	start := time.Now()
	type job struct {
		i   int
		uid types.UID
	}
	jobs := make(chan job, 1024)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				pod := scalePod(e.Namespace, j.i/scalePodsPerWorkload, j.i, j.uid, nodes[j.i%len(nodes)])
				for attempt := 0; ; attempt++ {
					err := createRunning(ctx, client, pod)
					if err == nil {
						break
					}
					if attempt == 5 || ctx.Err() != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
						break
					}
					time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
				}
			}
		}()
	}
	rsNames := make([]string, workloads)
	for w := 0; w < workloads; w++ {
		rs, err := client.AppsV1().ReplicaSets(e.Namespace).Create(ctx, scaleReplicaSet(e.Namespace, w,
			min(scalePodsPerWorkload, total-w*scalePodsPerWorkload)), metav1.CreateOptions{})
		if err != nil {
			close(jobs)
			wg.Wait()
			b.Fatal(err)
		}
		rsNames[w] = rs.Name
		for i := w * scalePodsPerWorkload; i < min(total, (w+1)*scalePodsPerWorkload); i++ {
			jobs <- job{i: i, uid: rs.UID}
		}
	}
	close(jobs)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d pods not created: %v", n, firstErr.Load())
	}
	patch := []byte(`{"spec":{"template":{"spec":{"priorityClassName":null}}}}`)
	for _, name := range rsNames {
		if _, err := client.AppsV1().ReplicaSets(e.Namespace).Patch(ctx, name, types.MergePatchType, patch,
			metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start).Seconds()
}

// createRunning creates a pod bound to its node and writes the status a
// kubelet (kwok) would: Running and Ready. A pod already created (a retry)
// only gets its status.
func createRunning(ctx context.Context, client kubernetes.Interface, pod *apiv1.Pod) error {
	created, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	now := metav1.Now()
	yes := true
	created.Status.Phase = apiv1.PodRunning
	created.Status.Conditions = nil
	for _, c := range []apiv1.PodConditionType{apiv1.PodScheduled, apiv1.PodInitialized, apiv1.PodReady, apiv1.ContainersReady} {
		created.Status.Conditions = append(created.Status.Conditions, apiv1.PodCondition{Type: c,
			Status: apiv1.ConditionTrue, LastTransitionTime: now})
	}
	created.Status.ContainerStatuses = []apiv1.ContainerStatus{{Name: "c", Image: "fake", Ready: true, Started: &yes,
		State: apiv1.ContainerState{Running: &apiv1.ContainerStateRunning{StartedAt: now}}}}
	created.Status.HostIP, created.Status.PodIP = "127.0.0.1", "127.0.0.1"
	created.Status.HostIPs = []apiv1.HostIP{{IP: "127.0.0.1"}}
	created.Status.PodIPs = []apiv1.PodIP{{IP: "127.0.0.1"}}
	created.Status.StartTime = &now
	_, err = client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

func scaleLabels(w int) map[string]string { return map[string]string{"app": fmt.Sprintf("wl-%04d", w)} }

func scalePodSpec() apiv1.PodSpec {
	return apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
		Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("250m"),
			apiv1.ResourceMemory: resource.MustParse("1Gi")}}}}}
}

func scaleReplicaSet(ns string, w, replicas int) *appsv1.ReplicaSet {
	n := int32(replicas)
	spec := scalePodSpec()
	spec.PriorityClassName = notYetPriorityClass
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("wl-%04d", w), Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: scaleLabels(w)},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: scaleLabels(w)}, Spec: spec}}}
}

func scalePod(ns string, w, i int, owner types.UID, node string) *apiv1.Pod {
	yes := true
	spec := scalePodSpec()
	spec.NodeName = node
	labels := scaleLabels(w)
	labels[presetStatusLabel] = "true"
	return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("wl-%04d-%06d", w, i), Namespace: ns,
		Labels: labels, OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
			Name: fmt.Sprintf("wl-%04d", w), UID: owner, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: spec}
}

// waitPodsRunning waits until none of the namespace's pods is Pending,
// listing only the Pending ones (one at a time) to spare the machine: the
// pods are all created by then, and kwok's only move is to Running.
func waitPodsRunning(b *testing.B, e *framework.Env, ns string, timeout time.Duration) {
	b.Helper()
	start := time.Now()
	for {
		list, err := e.Client.CoreV1().Pods(ns).List(e.Context(), metav1.ListOptions{FieldSelector: "status.phase=Pending", Limit: 1})
		if err != nil {
			b.Fatal(err)
		}
		if len(list.Items) == 0 {
			return
		}
		if time.Since(start) > timeout {
			b.Fatalf("pods of %s still Pending after %v", ns, timeout)
		}
		time.Sleep(5 * time.Second)
	}
}
