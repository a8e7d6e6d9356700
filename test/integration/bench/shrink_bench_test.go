package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
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

// BenchmarkScaleDownShrink (issue 31): the real binary on a control plane of
// its own holding N kwok nodes (16 CPU, 64 GiB) full with 10 pods each
// (1.6 CPU, 6 GiB: ten fill a node's CPU exactly), owned by Deployments of
// 100 replicas placed by the scheduler and run by kwok; then every
// Deployment is cut to 40 replicas (60% of the pods go, the ReplicaSet
// controller picks which). The floor is the nodes the remaining pods need,
// computed from their requests: ceil(pods / pods per node). With
// --scale-down-utilization-threshold=0.95 every node that is not full is a
// candidate, so the floor is also where the autoscaler's own simulation
// stops. Evicted pods are recreated by their ReplicaSets and rescheduled.
//
// Measured from the cut: the loops and the minutes to the floor (and to
// within 10% and 5% of it), the unneeded count and the node count over time,
// nodes removed, pods evicted, scale-ups (an overshoot would show there),
// and the peak RSS of the process; at the end no pod may be Pending and
// every Deployment must have its 40 pods Ready. The scale-down phase is
// bounded by SHRINK_DEADLINE (default 25m): past it the benchmark reports
// what it reached and fails.
//
// Flags of the measured run: --scale-down-unneeded-time=10s,
// --scale-down-delay-after-add=0s, --scale-down-utilization-threshold=0.95,
// --max-scale-down-parallelism and --max-drain-parallelism at 5% of the
// nodes (SHRINK_PARALLELISM overrides; upstream's defaults are 10 and 1),
// --kube-client-qps=200 --kube-client-burst=400 as BenchmarkScale, and the
// defaults otherwise (candidate count 30, pool ratio 0.1, scan interval 10s,
// unremovable recheck 5m). nodes=100 checks the benchmark itself:
//
//	go test -run xxx -bench 'ScaleDownShrink/nodes=1000$' -benchtime 1x -timeout 60m -v ./test/integration/bench
//
// SHRINK_LOG=<file> keeps the measured autoscaler's log.
func BenchmarkScaleDownShrink(b *testing.B) {
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchShrink(b, nodes)
			}
		})
	}
}

const (
	shrinkPodsPerNode     = 10
	shrinkPodsPerWorkload = 100
	shrinkKeepPerWorkload = 40
	shrinkUnneededTime    = 10 * time.Second
)

var (
	shrinkPodCPU    = resource.MustParse("1600m")
	shrinkPodMemory = resource.MustParse("6Gi")
	shrinkNodeCPU   = resource.MustParse("16")
	shrinkNodeMem   = resource.MustParse("64Gi")
)

// shrinkSample is one look at the cluster during the scale-down.
type shrinkSample struct {
	at                time.Duration // since the cut
	loops             float64       // loops ended since the cut
	nodes, pending    int
	unneeded, removed float64
}

func (s shrinkSample) String() string {
	return fmt.Sprintf("+%.0fs loop %.0f: nodes %d unneeded %.0f removed %.0f pending %d", s.at.Seconds(), s.loops,
		s.nodes, s.unneeded, s.removed, s.pending)
}

func shrinkEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func benchShrink(b *testing.B, nodes int) {
	b.StopTimer()
	deadline := 25 * time.Minute
	if v := os.Getenv("SHRINK_DEADLINE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("SHRINK_DEADLINE: %v", err)
		}
		deadline = d
	}
	parallelism := shrinkEnvInt(b, "SHRINK_PARALLELISM", max(10, nodes/20))
	e := framework.NewCluster(b, framework.ClusterOptions{NodeLeaseSeconds: 240, KwokParallelism: 16})
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
createQPS: 1000
workers: 32
nodeGroups:
- name: base
  minSize: 0
  maxSize: %[1]d
  initialSize: %[1]d
  template:
    labels: {pool: base}
    capacity: {cpu: "%[2]s", memory: %[3]s, pods: "110"}
`, nodes, shrinkNodeCPU.String(), shrinkNodeMem.String()))
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--kube-client-qps=200", "--kube-client-burst=400"}

	setupStart := time.Now()
	setup := itest.StartAutoscaler(b, "setup", append(args, "--scale-down-enabled=false", "--kube-client-qps=2000",
		"--kube-client-burst=4000")...)
	waitNodesReady(b, e, "base", nodes, 10*time.Minute)
	if code := setup.Terminate(time.Minute); code != 0 {
		b.Logf("setup autoscaler exited with %d", code)
	}
	total := nodes * shrinkPodsPerNode
	workloads := (total + shrinkPodsPerWorkload - 1) / shrinkPodsPerWorkload
	for w := 0; w < workloads; w++ {
		shrinkDeployment(b, e, w, int32(min(shrinkPodsPerWorkload, total-w*shrinkPodsPerWorkload)))
	}
	waitDeploymentsReady(b, e, total, 30*time.Minute)
	b.Logf("setup: %d nodes, %d pods Ready in %.0fs; load average %s", nodes, total,
		time.Since(setupStart).Seconds(), loadAverage())

	p := itest.StartAutoscaler(b, "autoscaler", append(args, "--v=2",
		"--scale-down-unneeded-time="+shrinkUnneededTime.String(), "--scale-down-delay-after-add=0s",
		"--scale-down-utilization-threshold=0.95",
		fmt.Sprintf("--max-scale-down-parallelism=%d", parallelism),
		fmt.Sprintf("--max-drain-parallelism=%d", parallelism))...)
	defer func() {
		if out := os.Getenv("SHRINK_LOG"); out != "" {
			_ = os.WriteFile(out, []byte(p.Log.String()), 0o600)
		}
	}()
	e.Eventually(5*time.Minute, "the first loop", func(ctx context.Context) (bool, error) {
		v, err := itest.ScrapeValues(ctx, p)
		return err == nil && v[mainCount] >= 1, nil
	})
	before, err := itest.ScrapeValues(e.Context(), p)
	if err != nil {
		b.Fatal(err)
	}
	if u := itest.SumOf(before, "cluster_autoscaler_unneeded_nodes_count"); u != 0 {
		b.Logf("before the cut: %.0f nodes unneeded (want 0: every node is full)", u)
	}

	// The cut.
	kept := 0
	for w := 0; w < workloads; w++ {
		n := min(shrinkKeepPerWorkload, total-w*shrinkPodsPerWorkload)
		kept += n
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := e.Client.AppsV1().Deployments(e.Namespace).Patch(e.Context(), shrinkName(w), types.MergePatchType,
			[]byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	perNode := shrinkPodsPerNodeFromRequests()
	floor := (kept + perNode - 1) / perNode
	b.StartTimer()
	cut := time.Now()
	samples, reached := sampleShrink(b, e, p, before, cut, floor, deadline)
	b.StopTimer()
	after, err := itest.ScrapeValues(e.Context(), p)
	if err != nil {
		b.Fatal(err)
	}

	// The end: every remaining pod Ready, none Pending.
	settled := waitShrinkSettled(e, workloads, kept, 5*time.Minute)
	reportShrink(b, p, shrinkOutcome{nodes: nodes, total: total, kept: kept, perNode: perNode, floor: floor,
		parallelism: parallelism, samples: samples, reached: reached, before: before, after: after,
		settled: settled, deadline: deadline})
}

// shrinkOutcome is what benchShrink measured, for reportShrink.
type shrinkOutcome struct {
	nodes, total, kept, perNode, floor, parallelism int
	samples                                         []shrinkSample
	reached                                         []shrinkMark
	before, after                                   map[string]float64
	settled                                         string
	deadline                                        time.Duration
}

// reportShrink reports the figures and fails the benchmark if the floor was
// not reached.
func reportShrink(b *testing.B, p *itest.AutoscalerProcess, o shrinkOutcome) {
	b.Helper()
	nodes, total, kept, perNode, floor, parallelism := o.nodes, o.total, o.kept, o.perNode, o.floor, o.parallelism
	samples, reached, before, after, settled, deadline := o.samples, o.reached, o.before, o.after, o.settled, o.deadline
	last := samples[len(samples)-1]
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(float64(floor), "floor-nodes")
	b.ReportMetric(float64(last.nodes), "nodes-at-end")
	b.ReportMetric(float64(parallelism), "parallelism")
	for _, r := range reached {
		if r.ok {
			b.ReportMetric(r.sample.loops, "loops-to-"+r.name)
			b.ReportMetric((r.sample.at - shrinkUnneededTime).Minutes(), "min-after-unneeded-to-"+r.name)
		}
	}
	b.ReportMetric(itest.SumOf(after, "cluster_autoscaler_scaled_down_nodes_total")-
		itest.SumOf(before, "cluster_autoscaler_scaled_down_nodes_total"), "nodes-removed")
	b.ReportMetric(itest.SumOf(after, "cluster_autoscaler_evicted_pods_total")-
		itest.SumOf(before, "cluster_autoscaler_evicted_pods_total"), "pods-evicted")
	b.ReportMetric(itest.SumOf(after, "cluster_autoscaler_scaled_up_nodes_total")-
		itest.SumOf(before, "cluster_autoscaler_scaled_up_nodes_total"), "nodes-scaled-up")
	b.ReportMetric(peakRSSMiB(p), "peak-RSS-MiB")
	b.ReportMetric(load1(), "loadavg-1m-end")

	var marks []string
	for _, r := range reached {
		if r.ok {
			marks = append(marks, fmt.Sprintf("%s (%d nodes) at %s", r.name, r.nodes, r.sample))
		} else {
			marks = append(marks, fmt.Sprintf("%s (%d nodes) not reached", r.name, r.nodes))
		}
	}
	b.Logf("cut: %d pods kept of %d, floor %d nodes (%d pods a node from requests); %s",
		kept, total, floor, perNode, strings.Join(marks, "; "))
	b.Logf("samples: %s", strings.Join(thinSamples(samples, 30*time.Second), " | "))
	b.Logf("left-out lines (the rotation at work): %d; end: %s; load average %s",
		strings.Count(p.Log.String(), "Nodes left out of this loop's scale-down simulation"), settled, loadAverage())
	if !reached[len(reached)-1].ok {
		b.Errorf("the floor of %d nodes was not reached within %v: %d nodes at the end", floor, deadline, last.nodes)
	}
}

func shrinkName(w int) string { return fmt.Sprintf("shrink-%03d", w) }

// shrinkPodsPerNodeFromRequests is how many of the pods a node holds, by
// CPU, memory and the pod count.
func shrinkPodsPerNodeFromRequests() int {
	byCPU := shrinkNodeCPU.MilliValue() / shrinkPodCPU.MilliValue()
	byMem := shrinkNodeMem.Value() / shrinkPodMemory.Value()
	return int(min(byCPU, byMem, 110))
}

func shrinkDeployment(b *testing.B, e *framework.Env, w int, replicas int32) {
	b.Helper()
	labels := map[string]string{"app": shrinkName(w)}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: shrinkName(w), Namespace: e.Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				NodeSelector: map[string]string{"pool": "base"},
				Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
					Requests: apiv1.ResourceList{apiv1.ResourceCPU: shrinkPodCPU,
						apiv1.ResourceMemory: shrinkPodMemory}}}}}}}}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), d, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// readyReplicas sums the Deployments' ready replicas (a cheap look at
// thousands of pods: one list of the Deployments).
func readyReplicas(ctx context.Context, e *framework.Env) (ready, replicas int, err error) {
	list, err := e.Client.AppsV1().Deployments(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, d := range list.Items {
		ready += int(d.Status.ReadyReplicas)
		replicas += int(d.Status.Replicas)
	}
	return ready, replicas, nil
}

func waitDeploymentsReady(b *testing.B, e *framework.Env, want int, timeout time.Duration) {
	b.Helper()
	start := time.Now()
	for {
		ready, _, err := readyReplicas(e.Context(), e)
		if err != nil {
			b.Fatal(err)
		}
		if ready >= want {
			return
		}
		if time.Since(start) > timeout {
			b.Fatalf("%d of %d pods Ready after %v", ready, want, timeout)
		}
		time.Sleep(5 * time.Second)
	}
}

// shrinkLook counts the pool's nodes and the namespace's Pending pods, from
// the API server's watch cache (resourceVersion 0).
func shrinkLook(ctx context.Context, e *framework.Env) (nodes, pending int, err error) {
	nl, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=base", ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	pl, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending",
		ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	return len(nl.Items), len(pl.Items), nil
}

// shrinkMark is a node count the scale-down is timed to.
type shrinkMark struct {
	name   string
	nodes  int
	ok     bool
	sample shrinkSample
}

// sampleShrink looks at the cluster every 5 s from the cut until the node
// count is at the floor or the deadline passes, and returns the samples and
// the first sample at or below floor+10%, floor+5% and the floor.
func sampleShrink(b *testing.B, e *framework.Env, p *itest.AutoscalerProcess, before map[string]float64, cut time.Time,
	floor int, deadline time.Duration) ([]shrinkSample, []shrinkMark) {
	b.Helper()
	marks := []shrinkMark{{name: "floor+10pct", nodes: floor + floor/10}, {name: "floor+5pct", nodes: floor + floor/20},
		{name: "floor", nodes: floor}}
	var samples []shrinkSample
	for {
		ctx, cancel := context.WithTimeout(e.Context(), 30*time.Second)
		nodes, pending, err := shrinkLook(ctx, e)
		v, serr := itest.ScrapeValues(ctx, p)
		cancel()
		if err == nil && serr == nil {
			s := shrinkSample{at: time.Since(cut), loops: v[mainCount] - before[mainCount], nodes: nodes,
				pending: pending, unneeded: itest.SumOf(v, "cluster_autoscaler_unneeded_nodes_count"),
				removed: itest.SumOf(v, "cluster_autoscaler_scaled_down_nodes_total") -
					itest.SumOf(before, "cluster_autoscaler_scaled_down_nodes_total")}
			samples = append(samples, s)
			for i := range marks {
				if !marks[i].ok && nodes <= marks[i].nodes {
					marks[i].ok, marks[i].sample = true, s
				}
			}
			if marks[len(marks)-1].ok {
				return samples, marks
			}
		}
		if time.Since(cut) > deadline {
			if len(samples) == 0 {
				b.Fatalf("no sample in %v: %v %v", deadline, err, serr)
			}
			return samples, marks
		}
		time.Sleep(5 * time.Second)
	}
}

// thinSamples keeps about one sample per step, and the last.
func thinSamples(samples []shrinkSample, step time.Duration) []string {
	var out []string
	next := time.Duration(0)
	for i, s := range samples {
		if s.at >= next || i == len(samples)-1 {
			out = append(out, s.String())
			next = s.at + step
		}
	}
	return out
}

// waitShrinkSettled waits until no pod is Pending and every Deployment has
// its pods Ready, and says how it ended; it fails the benchmark if that did
// not happen within timeout.
func waitShrinkSettled(e *framework.Env, workloads, kept int, timeout time.Duration) string {
	e.T.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(e.Context(), 30*time.Second)
		nodes, pending, err := shrinkLook(ctx, e)
		ready, replicas, rerr := readyReplicas(ctx, e)
		cancel()
		state := fmt.Sprintf("%d nodes, %d pods Pending, %d of %d pods Ready (%d replicas, %d Deployments) after %.0fs more",
			nodes, pending, ready, kept, replicas, workloads, time.Since(start).Seconds())
		if err == nil && rerr == nil && pending == 0 && ready == kept && replicas == kept {
			return state
		}
		if time.Since(start) > timeout {
			e.T.Errorf("not settled after %v: %s (%v %v)", timeout, state, err, rerr)
			return state
		}
		time.Sleep(5 * time.Second)
	}
}
