package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// BenchmarkBurstDeployment500 and BenchmarkBurstDeployment10000: a
// Deployment of 1-CPU / 1 GiB pods created on an empty cluster with two kwok
// groups (4 CPU / 16 GiB and 16 CPU / 64 GiB), least-waste and the default
// --scan-interval (10s), the autoscaler running before the clock starts.
// Reported: seconds from the Deployment's creation to the last pod's
// creation, to all pods bound and to all Running (the last two also after
// the last pod's creation), the scale-up decisions (log lines "Scaled up node
// group"), nodes per group, back-offs and the autoscaler's peak RSS.
//
//	go test -run xxx -bench BurstDeployment -benchtime 1x -timeout 30m ./test/integration/bench
//
// BURST_LOG=<path> keeps the autoscaler's log there. BURST_KWOK_PARALLELISM=N
// runs on a control plane of the benchmark's own whose kwok plays N node and
// pod stages at once (kwok's default, and the shared control plane's, is 4).
// BURST_PREPROVISION=<small>,<large> gives the groups that many nodes before
// the clock starts (the autoscaler then has nothing to decide): the control
// plane's own time for the burst, the floor under the autoscaler's figures.
func BenchmarkBurstDeployment500(b *testing.B) { benchBurst(b, 500, 200, 60) }

// BenchmarkBurstDeployment10000 runs at upstream's default
// --pod-injection-limit of 5,000: the ReplicaSet is counted in consecutive
// pieces (processors.ReplicaPlans). BURST_INJECTION_LIMIT=<n> sets another
// limit.
func BenchmarkBurstDeployment10000(b *testing.B) {
	var extra []string
	if v := os.Getenv("BURST_INJECTION_LIMIT"); v != "" {
		extra = append(extra, "--pod-injection-limit="+v)
	}
	benchBurst(b, 10000, 200, 700, extra...)
}

func benchBurst(b *testing.B, replicas int32, smallMax, largeMax int, extraArgs ...string) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := burstEnv(b)
		small, large := framework.UniqueName("small"), framework.UniqueName("large")
		initSmall, initLarge := burstPreprovision(b)
		path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: %[5]d
  initialSize: %[7]d
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, burst: %[4]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: %[2]s
  maxSize: %[6]d
  initialSize: %[8]d
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, burst: %[4]s}
    capacity: {cpu: "16", memory: 64Gi, pods: "110"}
`, small, large, framework.TestNamespaceLabel, e.Namespace, smallMax, largeMax, initSmall, initLarge))
		p := itest.StartAutoscaler(b, "autoscaler", append([]string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace,
			"--cloud-provider=kwok", "--kwok-provider-enabled", "--cloud-config=" + path, "--expander=least-waste", "--v=2",
			"--kube-client-qps=200", "--kube-client-burst=400", "--scale-down-enabled=false"}, extraArgs...)...)
		e.Eventually(30*time.Second, "the autoscaler looping", func(context.Context) (bool, error) {
			return p.Log.Contains("Informer caches synced"), nil
		})
		w := watchPods(b, e)
		nw := watchNodes(b, e)
		if want := initSmall + initLarge; want > 0 {
			e.Eventually(10*time.Minute, "the preprovisioned nodes schedulable", func(context.Context) (bool, error) {
				return nw.schedulableCount() == want, nil
			})
		}

		cpuBefore := cpuSeconds(p)
		b.StartTimer()
		start := time.Now()
		decided := make(chan time.Time, 1)
		stopPoll := make(chan struct{})
		go func() {
			for {
				select {
				case <-stopPoll:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if p.Log.Contains("\"Scaled up node group\"") {
					decided <- time.Now()
					return
				}
			}
		}()
		itest.Deployment(e, "burst", replicas, map[string]string{"burst": e.Namespace})
		e.Eventually(15*time.Minute, "all pods Running", func(context.Context) (bool, error) {
			return w.running() == int(replicas), nil
		})
		b.StopTimer()
		close(stopPoll)
		if path := os.Getenv("BURST_LOG"); path != "" { // the autoscaler's log, for a closer look
			_ = os.WriteFile(path, []byte(p.Log.String()), 0o600)
		}

		lastCreated, allBound, allRunning := w.times()
		nodes := itest.NodesPerPool(e)
		decisions := strings.Count(p.Log.String(), "\"Scaled up node group\"")
		b.ReportMetric(float64(scaleUpLoops(p.Log.String())), "scale-up-loops")
		backoffs := strings.Count(p.Log.String(), "Node group backed off")
		b.ReportMetric(lastCreated.Sub(start).Seconds(), "s-to-last-pod-created")
		b.ReportMetric(allBound.Sub(start).Seconds(), "s-to-all-bound")
		b.ReportMetric(allRunning.Sub(start).Seconds(), "s-to-all-running")
		b.ReportMetric(allBound.Sub(lastCreated).Seconds(), "s-bound-after-last-created")
		b.ReportMetric(allRunning.Sub(lastCreated).Seconds(), "s-running-after-last-created")
		// Where the time after the last pod goes: the last node's Node
		// object, its Ready condition, and the last not-ready taint removed
		// (the node schedulable), each after the last pod's creation.
		nodeSeen, nodeReady, nodeSchedulable := nw.times()
		b.ReportMetric(nodeSeen.Sub(lastCreated).Seconds(), "s-last-node-created-after-last-pod")
		b.ReportMetric(nodeReady.Sub(lastCreated).Seconds(), "s-last-node-ready-after-last-pod")
		b.ReportMetric(nodeSchedulable.Sub(lastCreated).Seconds(), "s-last-node-schedulable-after-last-pod")
		b.ReportMetric(float64(decisions), "decisions")
		select {
		case at := <-decided:
			b.ReportMetric(at.Sub(start).Seconds(), "s-to-first-decision")
		default:
		}
		b.ReportMetric(float64(nodes[small]), "small-nodes")
		b.ReportMetric(float64(nodes[large]), "large-nodes")
		b.ReportMetric(float64(backoffs), "backoffs")
		b.ReportMetric(peakRSSMiB(p), "peak-RSS-MiB")
		b.ReportMetric(cpuSeconds(p)-cpuBefore, "autoscaler-CPU-s")
		if backoffs > 0 {
			b.Errorf("%d node groups backed off", backoffs)
		}
		// No over- or under-shoot: every pod runs, and each group's last
		// node is the only one that may have room for another pod.
		perNode := map[string]int{small: 4, large: 16}
		onGroup := w.podsPerPool(e)
		for _, g := range []string{small, large} {
			if spare := nodes[g]*perNode[g] - onGroup[g]; spare < 0 || spare >= perNode[g] {
				b.Errorf("group %s: %d nodes for %d pods (%d pods each): overshoot", g, nodes[g], onGroup[g], perNode[g])
			}
		}
	}
}

// scaleUpLoops counts the loops that scaled a group up (one loop may grow
// several groups, each a "Scaled up node group" line).
func scaleUpLoops(log string) int {
	loops := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "\"Scaled up node group\"") {
			continue
		}
		if i := strings.Index(line, " loop="); i >= 0 {
			loops[strings.Fields(line[i+len(" loop="):])[0]] = true
		}
	}
	return len(loops)
}

// burstEnv is the shared control plane, or one of the benchmark's own with
// BURST_KWOK_PARALLELISM set.
func burstEnv(b *testing.B) *framework.Env {
	v := os.Getenv("BURST_KWOK_PARALLELISM")
	if v == "" {
		return framework.New(b)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("BURST_KWOK_PARALLELISM=%q: want a positive number", v)
	}
	return framework.NewCluster(b, framework.ClusterOptions{KwokParallelism: n})
}

// podWatch records when each pod of the namespace was first seen, bound and
// Running, by the local clock.
type podWatch struct {
	mu      sync.Mutex
	created map[string]time.Time
	bound   map[string]time.Time
	run     map[string]time.Time
	node    map[string]string
}

func watchPods(t testing.TB, e *framework.Env) *podWatch {
	w := &podWatch{created: map[string]time.Time{}, bound: map[string]time.Time{}, run: map[string]time.Time{},
		node: map[string]string{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithNamespace(e.Namespace))
	see := func(obj any) {
		pod, ok := obj.(*apiv1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.created[pod.Name]; !ok {
			w.created[pod.Name] = now
		}
		if _, ok := w.bound[pod.Name]; !ok && pod.Spec.NodeName != "" {
			w.bound[pod.Name] = now
			w.node[pod.Name] = pod.Spec.NodeName
		}
		if _, ok := w.run[pod.Name]; !ok && pod.Status.Phase == apiv1.PodRunning {
			w.run[pod.Name] = now
		}
	}
	watchAddsAndUpdates(t, f, f.Core().V1().Pods().Informer(), see)
	return w
}

// nodeWatch records when each node of the namespace's groups was first seen,
// Ready, and free of the not-ready taint, by the local clock.
type nodeWatch struct {
	mu          sync.Mutex
	seen, ready map[string]time.Time
	schedulable map[string]time.Time
}

func watchNodes(t testing.TB, e *framework.Env) *nodeWatch {
	w := &nodeWatch{seen: map[string]time.Time{}, ready: map[string]time.Time{}, schedulable: map[string]time.Time{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = framework.TestNamespaceLabel + "=" + e.Namespace
	}))
	see := func(obj any) {
		node, ok := obj.(*apiv1.Node)
		if !ok {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.seen[node.Name]; !ok {
			w.seen[node.Name] = now
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == apiv1.NodeReady && c.Status == apiv1.ConditionTrue {
				ready = true
			}
		}
		if _, ok := w.ready[node.Name]; !ok && ready {
			w.ready[node.Name] = now
		}
		tainted := false
		for _, taint := range node.Spec.Taints {
			if taint.Key == apiv1.TaintNodeNotReady {
				tainted = true
			}
		}
		if _, ok := w.schedulable[node.Name]; !ok && ready && !tainted {
			w.schedulable[node.Name] = now
		}
	}
	watchAddsAndUpdates(t, f, f.Core().V1().Nodes().Informer(), see)
	return w
}

// watchAddsAndUpdates calls see with every object informer adds or updates,
// starts f until the test ends and waits for its caches.
func watchAddsAndUpdates(t testing.TB, f informers.SharedInformerFactory, informer cache.SharedIndexInformer, see func(any)) {
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
}

func (w *nodeWatch) schedulableCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.schedulable)
}

// burstPreprovision reads BURST_PREPROVISION (see BenchmarkBurstDeployment500).
func burstPreprovision(b *testing.B) (small, large int) {
	v := os.Getenv("BURST_PREPROVISION")
	if v == "" {
		return 0, 0
	}
	if _, err := fmt.Sscanf(v, "%d,%d", &small, &large); err != nil || small < 0 || large < 0 {
		b.Fatalf("BURST_PREPROVISION=%q: want <small>,<large> node counts", v)
	}
	return small, large
}

func (w *nodeWatch) times() (lastSeen, lastReady, lastSchedulable time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return latest(w.seen), latest(w.ready), latest(w.schedulable)
}

func (w *podWatch) running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.run)
}

func latest(m map[string]time.Time) time.Time {
	var out time.Time
	for _, t := range m {
		if t.After(out) {
			out = t
		}
	}
	return out
}

func (w *podWatch) times() (lastCreated, allBound, allRunning time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return latest(w.created), latest(w.bound), latest(w.run)
}

// podsPerPool counts the pods bound to nodes of each pool label value.
func (w *podWatch) podsPerPool(e *framework.Env) map[string]int {
	e.T.Helper()
	list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: framework.TestNamespaceLabel + "=" + e.Namespace})
	if err != nil {
		e.T.Fatal(err)
	}
	pool := map[string]string{}
	for _, n := range list.Items {
		pool[n.Name] = n.Labels["pool"]
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, node := range w.node {
		out[pool[node]]++
	}
	return out
}

// peakRSSMiB reads the autoscaler process's peak resident set (VmHWM).
func peakRSSMiB(p *itest.AutoscalerProcess) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

// cpuSeconds reads the CPU time (user and system) the autoscaler process has
// used, from /proc/<pid>/stat at the usual 100 ticks per second.
func cpuSeconds(p *itest.AutoscalerProcess) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
	if err != nil {
		return -1
	}
	// The command name may hold spaces: the fields start after its ')'.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (utime + stime) / 100
}
