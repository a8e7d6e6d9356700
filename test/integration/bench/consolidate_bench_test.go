package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// BenchmarkConsolidation (issue 40, item 7): the real binary, with
// --consolidation-enabled, on a control plane of its own holding 200 kwok
// nodes in three groups of different sizes and prices (consolidateGroups:
// the largest is the cheapest per CPU), full with 1-CPU pods of 34
// Deployments of 40 replicas; half the Deployments (the even ones) have a
// PodDisruptionBudget allowing one disruption (maxUnavailable 1). Then every
// Deployment is cut to 16 replicas (40% of the pods stay; the ReplicaSet
// controller picks which go).
//
// Measured from the cut, every 5 s: the price per hour of the nodes there
// are, against a lower bound: the cheapest set of nodes of the three groups
// (within their max sizes) whose CPU holds the remaining pods' requests.
// The pods are identical (1 CPU, 1 GiB; memory and the pod count never
// bind), so that integer bound is the exact optimum, not only a bound.
// Also the pods evicted (the eviction API's DisruptionTarget condition),
// among them the pods evicted that were themselves created after the cut
// (a replica moved twice), the Pending pods and the longest any pod created
// after the cut waited to be bound, and every PodDisruptionBudget status
// with fewer healthy pods than desired (a violation). The run is bounded:
// CONSOLIDATE_DURATION (default 11m) after the cut, then up to 5 minutes for
// the pods to settle. It fails when the cost is not within 95% of the bound
// 10 minutes after the cut, a pod waited more than 60 s, or a budget was
// broken.
//
// Flags of the measured run: --consolidation-enabled with the consolidation
// settings at their defaults, --disruption-settle-time=1m (the setup's nodes
// are a few minutes old at the cut; the default of 10m would hold them
// back), scale-down at upstream's defaults (enabled, unneeded time 10m,
// threshold 0.5), --kube-client-qps=200 --kube-client-burst=400 as the other
// benchmarks:
//
//	go test -run xxx -bench Consolidation -benchtime 1x -timeout 60m -v ./test/integration/bench
//
// CONSOLIDATE_LOG=<file> keeps the measured autoscaler's log;
// CONSOLIDATE_ARGS adds flags to the measured run (space-separated), e.g.
// --scale-down-enabled=false to measure the consolidation alone.
func BenchmarkConsolidation(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchConsolidation(b)
	}
}

// consolidateGroup is one of the benchmark's node groups.
type consolidateGroup struct {
	name          string
	cpu, initial  int
	max           int
	pricePerHour  float64
	memoryPerNode string
}

var consolidateGroups = []consolidateGroup{
	{name: "small", cpu: 4, initial: 120, max: 130, pricePerHour: 0.20, memoryPerNode: "16Gi"},
	{name: "medium", cpu: 8, initial: 50, max: 60, pricePerHour: 0.36, memoryPerNode: "32Gi"},
	{name: "large", cpu: 16, initial: 30, max: 60, pricePerHour: 0.64, memoryPerNode: "64Gi"},
}

const (
	consolidateReplicas = 40
	consolidateKeep     = 16
	consolidatePool     = "consolidate"
)

// consolidateSample is one look at the cluster after the cut.
type consolidateSample struct {
	at      time.Duration
	nodes   map[string]int // per group
	cost    float64
	figures disruptFigures
}

func (s consolidateSample) String() string {
	var per []string
	for _, g := range consolidateGroups {
		per = append(per, fmt.Sprintf("%s %d", g.name, s.nodes[g.name]))
	}
	return fmt.Sprintf("+%.0fs: %s, $%.2f/h, evicted %d (again %d), pending %d", s.at.Seconds(), strings.Join(per, " "),
		s.cost, s.figures.evictions, s.figures.again, s.figures.pending)
}

// consolidateBound returns the cheapest node counts per group (within the
// max sizes) whose CPU holds pods 1-CPU pods, and their price per hour.
func consolidateBound(pods int) (map[string]int, float64) {
	best, bestCost := map[string]int(nil), math.Inf(1)
	s, m, l := consolidateGroups[0], consolidateGroups[1], consolidateGroups[2]
	for nl := 0; nl <= l.max; nl++ {
		for nm := 0; nm <= m.max; nm++ {
			rest := pods - nl*l.cpu - nm*m.cpu
			ns := 0
			if rest > 0 {
				ns = (rest + s.cpu - 1) / s.cpu
			}
			if ns > s.max {
				continue
			}
			cost := float64(ns)*s.pricePerHour + float64(nm)*m.pricePerHour + float64(nl)*l.pricePerHour
			if cost < bestCost-1e-9 {
				best, bestCost = map[string]int{s.name: ns, m.name: nm, l.name: nl}, cost
			}
		}
	}
	return best, bestCost
}

func consolidateConfig() string {
	var sb strings.Builder
	sb.WriteString("createQPS: 1000\nworkers: 32\nnodeGroups:\n")
	for _, g := range consolidateGroups {
		fmt.Fprintf(&sb, `- name: %[1]s
  minSize: 0
  maxSize: %[2]d
  initialSize: %[3]d
  pricePerHour: %[4]g
  template:
    labels: {pool: %[5]s, size: %[1]s}
    capacity: {cpu: "%[6]d", memory: %[7]s, pods: "110"}
`, g.name, g.max, g.initial, g.pricePerHour, consolidatePool, g.cpu, g.memoryPerNode)
	}
	return sb.String()
}

func consolidateName(w int) string { return fmt.Sprintf("cons-%03d", w) }

func benchConsolidation(b *testing.B) {
	b.StopTimer()
	duration := envDuration(b, "CONSOLIDATE_DURATION", 11*time.Minute)
	e := framework.NewCluster(b, framework.ClusterOptions{NodeLeaseSeconds: 240, KwokParallelism: 16})
	path := itest.WriteKwokConfig(e, consolidateConfig())
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--kube-client-qps=200", "--kube-client-burst=400"}

	setupStart := time.Now()
	nodes, totalCPU := 0, 0
	for _, g := range consolidateGroups {
		nodes += g.initial
		totalCPU += g.initial * g.cpu
	}
	setup := itest.StartAutoscaler(b, "setup", append(args, "--scale-down-enabled=false", "--kube-client-qps=2000",
		"--kube-client-burst=4000")...)
	waitNodesReady(b, e, consolidatePool, nodes, 10*time.Minute)
	if code := setup.Terminate(time.Minute); code != 0 {
		b.Logf("setup autoscaler exited with %d", code)
	}
	workloads := consolidateWorkload(b, e, totalCPU)
	total := workloads * consolidateReplicas
	startCost := consolidateCostOf(consolidateNodeCounts(b, e))
	b.Logf("setup: %d nodes ($%.2f/h), %d pods Ready in %.0fs; load average %s", nodes, startCost, total,
		time.Since(setupStart).Seconds(), loadAverage())

	watch := watchDisruption(b, e)
	measured := append(args, "--v=2", "--consolidation-enabled", "--disruption-settle-time=1m")
	measured = append(measured, strings.Fields(os.Getenv("CONSOLIDATE_ARGS"))...)
	p := itest.StartAutoscaler(b, "autoscaler", measured...)
	defer func() {
		if out := os.Getenv("CONSOLIDATE_LOG"); out != "" {
			_ = os.WriteFile(out, []byte(p.Log.String()), 0o600)
		}
	}()
	e.Eventually(5*time.Minute, "the first loop", func(ctx context.Context) (bool, error) {
		v, err := itest.ScrapeValues(ctx, p)
		return err == nil && v[mainCount] >= 1, nil
	})

	consolidateCut(b, e, watch, workloads, startCost, duration, func() string {
		if v, err := itest.ScrapeValues(e.Context(), p); err == nil {
			return disruptionDecisions(v)
		}
		return ""
	})
}

// consolidateWorkload creates the Deployments that fill cpus CPUs, a
// PodDisruptionBudget on every even one, and waits until their pods are
// Ready; it returns how many Deployments.
func consolidateWorkload(b *testing.B, e *framework.Env, cpus int) int {
	b.Helper()
	workloads := cpus / consolidateReplicas
	for w := 0; w < workloads; w++ {
		consolidateDeployment(b, e, w)
		if w%2 == 0 {
			if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(),
				maxUnavailablePDB(e.Namespace, consolidateName(w)), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	waitDeploymentsReady(b, e, workloads*consolidateReplicas, 30*time.Minute)
	return workloads
}

// consolidateCut cuts every Deployment to consolidateKeep replicas, samples
// the cluster for duration, waits for the pods to settle and reports;
// decisions describes what the measured autoscaler decided.
func consolidateCut(b *testing.B, e *framework.Env, watch *disruptWatch, workloads int, startCost float64,
	duration time.Duration, decisions func() string) {
	b.Helper()
	kept := workloads * consolidateKeep
	boundNodes, bound := consolidateBound(kept)
	atCut, err := consolidateNodeGroups(e)
	if err != nil {
		b.Fatal(err)
	}
	cut := time.Now()
	watch.reset(cut)
	b.StartTimer()
	for w := 0; w < workloads; w++ {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, consolidateKeep)
		if _, err := e.Client.AppsV1().Deployments(e.Namespace).Patch(e.Context(), consolidateName(w), types.MergePatchType,
			[]byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var samples []consolidateSample
	for time.Since(cut) < duration {
		time.Sleep(5 * time.Second)
		counts, err := consolidateNodeCountsErr(e)
		if err != nil {
			continue
		}
		now := time.Now()
		samples = append(samples, consolidateSample{at: now.Sub(cut), nodes: counts, cost: consolidateCostOf(counts),
			figures: watch.figures(now)})
	}
	b.StopTimer()
	if len(samples) == 0 {
		b.Fatal("no sample")
	}
	settled := waitPodsSettled(e, kept, 5*time.Minute)
	end := watch.figures(time.Now())
	atEnd, err := consolidateNodeGroups(e)
	if err != nil {
		b.Fatal(err)
	}
	reportConsolidation(b, consolidateOutcome{startCost: startCost, bound: bound, boundNodes: boundNodes, kept: kept,
		total: workloads * consolidateReplicas, samples: samples, end: end, settled: settled, decisions: decisions(),
		moves: consolidateMoves(watch, atCut, atEnd, kept, consolidateCostOf(groupCounts(atEnd)), bound)})
}

// consolidateMoveFloor is what the evictions are measured against: where
// the kept pods were at the cut, and the fewest of them any end state must
// move.
type consolidateMoveFloor struct {
	// survivors: the kept pods found at the cut (should be kept).
	survivors int
	// leftNodes: the kept pods that were on nodes gone at the end; every
	// one of them was evicted at least once.
	leftNodes int
	// atEndCost, atBound95, atBound: the fewest kept pods that must move
	// for any node set (within the groups' max sizes) costing at most the
	// end's cost, the bound / 0.95, the bound.
	atEndCost, atBound95, atBound int
	// from: the evictions per kind of node left (group, old or new, and
	// whether the pod had been moved before).
	from map[string]int
	// landed, landedAgain: where the pods created after the cut were bound
	// (the node's group, old or new, and whether it carried the
	// consolidation mark then), all and those evicted again.
	landed, landedAgain map[string]int
}

// consolidateMoves measures the kept pods' moves against the floors.
func consolidateMoves(w *disruptWatch, atCut, atEnd map[string]string, kept int, endCost, bound float64) consolidateMoveFloor {
	per := w.cutSurvivors()
	f := consolidateMoveFloor{from: w.evictedFrom("size")}
	f.landed, f.landedAgain = w.landings()
	byGroup := map[string][]int{}
	for node, g := range atCut {
		n := per[node]
		f.survivors += n
		if _, stays := atEnd[node]; !stays {
			f.leftNodes += n
		}
		byGroup[g] = append(byGroup[g], n)
	}
	f.atEndCost = consolidateFewestMoves(byGroup, kept, endCost+1e-9)
	f.atBound95 = consolidateFewestMoves(byGroup, kept, bound/0.95+1e-9)
	f.atBound = consolidateFewestMoves(byGroup, kept, bound+1e-9)
	return f
}

// consolidateFewestMoves returns the fewest of the kept pods that must move
// for any node counts per group (within the max sizes) whose price is at
// most limit and whose CPUs hold them, given the pods on each group's nodes
// at the cut: a node set of t nodes of a group keeps at best that group's t
// fullest nodes (then new ones, empty). The pods are 1 CPU each, so the CPU
// count is the only fit; -1 when no node set is within the limit.
func consolidateFewestMoves(byGroup map[string][]int, kept int, limit float64) int {
	prefix := make([][]int, len(consolidateGroups))
	for i, g := range consolidateGroups {
		counts := append([]int(nil), byGroup[g.name]...)
		sort.Sort(sort.Reverse(sort.IntSlice(counts)))
		prefix[i] = make([]int, len(counts)+1)
		for j, c := range counts {
			prefix[i][j+1] = prefix[i][j] + c
		}
	}
	stay := func(i, t int) int { return prefix[i][min(t, len(prefix[i])-1)] }
	s, m, l := consolidateGroups[0], consolidateGroups[1], consolidateGroups[2]
	best := -1
	for ts := 0; ts <= s.max; ts++ {
		for tm := 0; tm <= m.max; tm++ {
			for tl := 0; tl <= l.max; tl++ {
				if ts*s.cpu+tm*m.cpu+tl*l.cpu < kept {
					continue
				}
				if float64(ts)*s.pricePerHour+float64(tm)*m.pricePerHour+float64(tl)*l.pricePerHour > limit {
					break
				}
				best = max(best, stay(0, ts)+stay(1, tm)+stay(2, tl))
			}
		}
	}
	if best < 0 {
		return -1
	}
	return kept - min(best, kept)
}

// consolidateNodeGroups names the pool's nodes with their group.
func consolidateNodeGroups(e *framework.Env) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(e.Context(), 30*time.Second)
	defer cancel()
	list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + consolidatePool})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range list.Items {
		out[n.Name] = n.Labels["size"]
	}
	return out, nil
}

func groupCounts(nodes map[string]string) map[string]int {
	out := map[string]int{}
	for _, g := range nodes {
		out[g]++
	}
	return out
}

type consolidateOutcome struct {
	startCost, bound float64
	boundNodes       map[string]int
	kept, total      int
	samples          []consolidateSample
	end              disruptFigures
	settled          string
	decisions        string
	moves            consolidateMoveFloor
}

func reportConsolidation(b *testing.B, o consolidateOutcome) {
	b.Helper()
	pct := func(s consolidateSample) float64 { return 100 * o.bound / s.cost }
	at := func(d time.Duration) consolidateSample {
		s := o.samples[0]
		for _, x := range o.samples {
			if x.at <= d {
				s = x
			}
		}
		return s
	}
	var marks []string
	for _, m := range []int{2, 4, 6, 8, 10} {
		s := at(time.Duration(m) * time.Minute)
		b.ReportMetric(pct(s), fmt.Sprintf("pct-of-bound-at-%dm", m))
		marks = append(marks, fmt.Sprintf("%dm: %.1f%% ($%.2f/h)", m, pct(s), s.cost))
	}
	for _, target := range []float64{90, 95, 99} {
		for _, s := range o.samples {
			if pct(s) >= target {
				b.ReportMetric(s.at.Minutes(), fmt.Sprintf("min-to-%.0fpct", target))
				marks = append(marks, fmt.Sprintf("%.0f%% at +%.0fs", target, s.at.Seconds()))
				break
			}
		}
	}
	last := o.samples[len(o.samples)-1]
	b.ReportMetric(o.bound, "bound-per-hour")
	b.ReportMetric(last.cost, "cost-per-hour-at-end")
	b.ReportMetric(float64(o.end.evictions), "pods-evicted")
	b.ReportMetric(float64(o.end.again), "pods-evicted-twice")
	b.ReportMetric(float64(o.moves.atEndCost), "fewest-moves-for-end-cost")
	b.ReportMetric(float64(o.moves.atBound95), "fewest-moves-for-95pct")
	b.ReportMetric(o.end.longestWait.Seconds(), "longest-pending-s")
	b.ReportMetric(float64(len(o.end.violations)), "pdb-violations")
	b.ReportMetric(load1(), "loadavg-1m-end")
	b.Logf("cut: %d pods kept of %d; cost before $%.2f/h; bound $%.2f/h (%v); %s", o.kept, o.total, o.startCost, o.bound,
		o.boundNodes, strings.Join(marks, "; "))
	var thin []string
	next := time.Duration(0)
	for i, s := range o.samples {
		if s.at >= next || i == len(o.samples)-1 {
			thin = append(thin, fmt.Sprintf("%s (%.1f%%)", s, pct(s)))
			next = s.at + 30*time.Second
		}
	}
	b.Logf("samples: %s", strings.Join(thin, " | "))
	b.Logf("evicted %d pods (%d of them created after the cut: moved twice), longest wait to be bound %.0fs, "+
		"least PDB margin %d, violations %d %v; decisions: %s; end: %s; load average %s", o.end.evictions, o.end.again,
		o.end.longestWait.Seconds(), o.end.minMargin, len(o.end.violations), o.end.violations, o.decisions, o.settled,
		loadAverage())
	b.Logf("moves: %d kept pods at the cut (%d expected), %d of them on nodes gone at the end; the fewest any node "+
		"set needs: %d at the end's cost, %d at 95%% of the bound, %d at the bound; evicted %d, from: %v",
		o.moves.survivors, o.kept, o.moves.leftNodes, o.moves.atEndCost, o.moves.atBound95, o.moves.atBound,
		o.end.evictions, o.moves.from)
	b.Logf("landed: the pods created after the cut were bound to %v; those evicted again had been bound to %v",
		o.moves.landed, o.moves.landedAgain)
	if len(o.end.violations) > 0 {
		b.Errorf("PodDisruptionBudgets broken: %v", o.end.violations)
	}
	if o.end.longestWait > time.Minute {
		b.Errorf("a pod waited %.0fs to be bound (target: at most 60 s)", o.end.longestWait.Seconds())
	}
	if p := pct(at(10 * time.Minute)); p < 95 {
		b.Errorf("%.1f%% of the lower bound 10 minutes after the cut (target: 95%%)", p)
	}
}

// disruptionDecisions sums cluster_autoscaler_disruption_decisions_total by
// its labels, as one line.
func disruptionDecisions(v map[string]float64) string {
	var out []string
	for k, x := range v {
		if strings.HasPrefix(k, "cluster_autoscaler_disruption_decisions_total{") && x > 0 {
			out = append(out, fmt.Sprintf("%s=%.0f", strings.TrimPrefix(k, "cluster_autoscaler_disruption_decisions_total"), x))
		}
	}
	return strings.Join(out, " ")
}

func consolidateCostOf(counts map[string]int) float64 {
	cost := 0.0
	for _, g := range consolidateGroups {
		cost += float64(counts[g.name]) * g.pricePerHour
	}
	return cost
}

func consolidateNodeCounts(b *testing.B, e *framework.Env) map[string]int {
	b.Helper()
	counts, err := consolidateNodeCountsErr(e)
	if err != nil {
		b.Fatal(err)
	}
	return counts
}

// consolidateNodeCountsErr counts the pool's nodes per group, from the API
// server's watch cache: a node is paid for until it is gone.
func consolidateNodeCountsErr(e *framework.Env) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(e.Context(), 30*time.Second)
	defer cancel()
	list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + consolidatePool,
		ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, n := range list.Items {
		counts[n.Labels["size"]]++
	}
	return counts, nil
}

func consolidateDeployment(b *testing.B, e *framework.Env, w int) {
	b.Helper()
	replicas := int32(consolidateReplicas)
	labels := map[string]string{"app": consolidateName(w)}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: consolidateName(w), Namespace: e.Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				NodeSelector: map[string]string{"pool": consolidatePool},
				Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
					Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
						apiv1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), d, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}
