package bench

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// BenchmarkDriftRoll (issue 40, item 8): the real binary on a control plane
// of its own, one kwok node group of 100 nodes (8 CPU) made from a template
// (label gen=a), half full with the 1-CPU pods of 10 Deployments of 40
// replicas, each Deployment with a PodDisruptionBudget allowing one
// disruption (maxUnavailable 1). Then the autoscaler restarts with the
// group's template changed (gen=b: another kwok template hash on the new
// nodes, so every node made before is drifted), --drift-enabled and
// --disruption-budget=nodes=10% (ten of the group's nodes at once).
//
// Measured from the restart: the time until no node of the old template is
// left (and when the first and the last were replaced), the pods evicted,
// the longest a pod waited to be bound, every PodDisruptionBudget status
// with fewer healthy pods than desired (a violation), and the order of
// replacement and drain: with one new node per drifted node, the k-th new
// node of the group must be Ready before the k-th old node's drain starts
// (its first eviction; its deletion when it held no pod), and the engine
// must never drain without its replacement Ready ("draining all the same"
// in its log). Scale-down is off (only drift removes nodes here) and the
// settle time is 1m (the nodes are a few minutes old at the restart).
// Bounded by DRIFT_DEADLINE (default 40m); it fails past it, on a broken
// budget, or on a drain before its replacement was Ready.
//
//	go test -run xxx -bench DriftRoll -benchtime 1x -timeout 80m -v ./test/integration/bench
//
// DRIFT_LOG=<file> keeps the measured autoscaler's log.
func BenchmarkDriftRoll(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchDrift(b)
	}
}

const (
	driftNodes     = 100
	driftWorkloads = 10
	driftReplicas  = 40
	driftPool      = "drift"
)

func driftConfig(gen string) string {
	return fmt.Sprintf(`
createQPS: 1000
workers: 32
nodeGroups:
- name: drift
  minSize: 0
  maxSize: %[1]d
  initialSize: %[2]d
  template:
    labels: {pool: %[3]s, gen: %[4]s}
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
`, driftNodes+driftNodes/5, driftNodes, driftPool, gen)
}

// driftNodeWatch records, by the local clock, when each node of the pool
// was first Ready and when it was deleted.
type driftNodeWatch struct {
	mu       sync.Mutex
	ready    map[string]time.Time
	deleted  map[string]time.Time
	cordoned map[string]time.Time
}

func watchDriftNodes(t testing.TB, e *framework.Env) *driftNodeWatch {
	w := &driftNodeWatch{ready: map[string]time.Time{}, deleted: map[string]time.Time{}, cordoned: map[string]time.Time{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = "pool=" + driftPool
	}))
	see := func(obj any) {
		n, ok := obj.(*apiv1.Node)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.cordoned[n.Name]; !ok && n.Spec.Unschedulable {
			w.cordoned[n.Name] = time.Now()
		}
		if _, ok := w.ready[n.Name]; !ok && itest.NodeReady(n) {
			w.ready[n.Name] = time.Now()
		}
	}
	informer := f.Core().V1().Nodes().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see,
		UpdateFunc: func(_, obj any) { see(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*apiv1.Node); ok {
				w.mu.Lock()
				w.deleted[n.Name] = time.Now()
				w.mu.Unlock()
			}
		}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return w
}

// mostDisrupted returns the most of the given nodes cordoned and not yet
// deleted at one time (the nodes the engine was disrupting at once).
func (w *driftNodeWatch) mostDisrupted(nodes map[string]bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for n := range nodes {
		c, ok := w.cordoned[n]
		if !ok {
			continue
		}
		edges = append(edges, edge{c, 1})
		if d, ok := w.deleted[n]; ok {
			edges = append(edges, edge{d, -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// snapshot returns copies of the Ready and deletion times.
func (w *driftNodeWatch) snapshot() (ready, deleted map[string]time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ready, deleted = map[string]time.Time{}, map[string]time.Time{}
	for k, v := range w.ready {
		ready[k] = v
	}
	for k, v := range w.deleted {
		deleted[k] = v
	}
	return ready, deleted
}

func benchDrift(b *testing.B) {
	b.StopTimer()
	deadline := envDuration(b, "DRIFT_DEADLINE", 40*time.Minute)
	e := framework.NewCluster(b, framework.ClusterOptions{NodeLeaseSeconds: 240, KwokParallelism: 16})
	path := itest.WriteKwokConfig(e, driftConfig("a"))
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--kube-client-qps=200", "--kube-client-burst=400"}
	setupStart := time.Now()
	setup := itest.StartAutoscaler(b, "setup", append(args, "--scale-down-enabled=false", "--kube-client-qps=2000",
		"--kube-client-burst=4000")...)
	old := map[string]bool{}
	for _, n := range waitNodesReady(b, e, driftPool, driftNodes, 10*time.Minute) {
		old[n] = true
	}
	if code := setup.Terminate(time.Minute); code != 0 {
		b.Logf("setup autoscaler exited with %d", code)
	}
	for w := 0; w < driftWorkloads; w++ {
		driftDeployment(b, e, w)
		if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(),
			maxUnavailablePDB(e.Namespace, driftName(w)), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	pods := driftWorkloads * driftReplicas
	waitDeploymentsReady(b, e, pods, 20*time.Minute)
	b.Logf("setup: %d nodes, %d pods Ready in %.0fs; load average %s", driftNodes, pods, time.Since(setupStart).Seconds(),
		loadAverage())

	nodes := watchDriftNodes(b, e)
	watch := watchDisruption(b, e)
	if err := os.WriteFile(path, []byte(driftConfig("b")), 0o600); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	watch.reset(start)
	b.StartTimer()
	p := itest.StartAutoscaler(b, "autoscaler", append(args, "--v=2", "--drift-enabled", "--disruption-budget=nodes=10%",
		"--disruption-settle-time=1m", "--scale-down-enabled=false")...)
	defer func() {
		if out := os.Getenv("DRIFT_LOG"); out != "" {
			_ = os.WriteFile(out, []byte(p.Log.String()), 0o600)
		}
	}()
	var samples []string
	var first, done time.Duration
	for {
		time.Sleep(5 * time.Second)
		_, deleted := nodes.snapshot()
		gone := 0
		for n := range old {
			if _, ok := deleted[n]; ok {
				gone++
			}
		}
		at := time.Since(start)
		if gone > 0 && first == 0 {
			first = at
		}
		if len(samples) == 0 || at-(time.Duration(len(samples))*30*time.Second) >= 0 {
			f := watch.figures(time.Now())
			samples = append(samples, fmt.Sprintf("+%.0fs: %d old gone, evicted %d, pending %d", at.Seconds(), gone,
				f.evictions, f.pending))
		}
		if gone == len(old) {
			done = at
			break
		}
		if at > deadline {
			break
		}
	}
	b.StopTimer()
	settled := waitPodsSettled(e, pods, 5*time.Minute)
	reportDrift(b, p, driftOutcome{old: old, nodes: nodes, watch: watch, first: first, done: done, deadline: deadline,
		samples: samples, settled: settled})
}

type driftOutcome struct {
	old                   map[string]bool
	nodes                 *driftNodeWatch
	watch                 *disruptWatch
	first, done, deadline time.Duration
	samples               []string
	settled               string
}

func reportDrift(b *testing.B, p *itest.AutoscalerProcess, o driftOutcome) {
	b.Helper()
	ready, deleted := o.nodes.snapshot()
	evictions := o.watch.firstEvictions()
	// Drain starts of the old nodes, Ready times of the new ones.
	drains, newReady := map[string]time.Time{}, map[string]time.Time{}
	for n := range o.old {
		if t, ok := evictions[n]; ok {
			drains[n] = t
		} else if t, ok := deleted[n]; ok {
			drains[n] = t
		}
	}
	for n, t := range ready {
		if !o.old[n] {
			newReady[n] = t
		}
	}
	ds, rs := sortedTimes(drains), sortedTimes(newReady)
	early := 0
	for k, d := range ds {
		if k >= len(rs) || rs[k].After(d) {
			early++
		}
	}
	allSame := strings.Count(p.Log.String(), "draining all the same")
	most := o.nodes.mostDisrupted(o.old)
	f := o.watch.figures(time.Now())
	b.ReportMetric(o.done.Minutes(), "min-to-all-replaced")
	b.ReportMetric(o.first.Minutes(), "min-to-first-replaced")
	b.ReportMetric(float64(len(newReady)), "new-nodes")
	b.ReportMetric(float64(f.evictions), "pods-evicted")
	b.ReportMetric(f.longestWait.Seconds(), "longest-pending-s")
	b.ReportMetric(float64(len(f.violations)), "pdb-violations")
	b.ReportMetric(float64(early), "drains-before-replacement-ready")
	b.ReportMetric(float64(most), "most-old-nodes-disrupted-at-once")
	b.ReportMetric(load1(), "loadavg-1m-end")
	decisions := ""
	if v, err := itest.ScrapeValues(b.Context(), p); err == nil {
		decisions = disruptionDecisions(v)
	}
	b.Logf("old nodes %d: first deleted at +%.0fs, all at +%.0fs; %d new nodes Ready; %d drains started before the "+
		"matching new node was Ready, %d log lines 'draining all the same'; at most %d old nodes cordoned and not yet "+
		"deleted at once", len(o.old), o.first.Seconds(), o.done.Seconds(), len(newReady), early, allSame, most)
	b.Logf("samples: %s", strings.Join(o.samples, " | "))
	b.Logf("evicted %d pods (%d created after the restart: moved twice), longest wait to be bound %.0fs, least PDB "+
		"margin %d, violations %d %v; decisions: %s; end: %s; load average %s", f.evictions, f.again,
		f.longestWait.Seconds(), f.minMargin, len(f.violations), f.violations, decisions, o.settled, loadAverage())
	if o.done == 0 {
		b.Errorf("old nodes left after %v", o.deadline)
	}
	if len(f.violations) > 0 {
		b.Errorf("PodDisruptionBudgets broken: %v", f.violations)
	}
	// 10% of the group's nodes, surge included: at most 10% of its max
	// size, rounded up.
	if limit := (driftNodes + driftNodes/5 + 9) / 10; most > limit {
		b.Errorf("%d old nodes disrupted at once: over the budget of 10%% of the group (at most %d)", most, limit)
	}
	if early > 0 || allSame > 0 {
		b.Errorf("%d drains started before a new node was Ready; %d drains without the replacement Ready", early, allSame)
	}
}

func driftName(w int) string { return fmt.Sprintf("drift-%02d", w) }

func driftDeployment(b *testing.B, e *framework.Env, w int) {
	b.Helper()
	replicas := int32(driftReplicas)
	labels := map[string]string{"app": driftName(w)}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: driftName(w), Namespace: e.Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				NodeSelector: map[string]string{"pool": driftPool},
				Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
					Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
						apiv1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), d, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}
