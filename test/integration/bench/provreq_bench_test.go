package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// BenchmarkAtomicRequest4x4096: from the creation of one best-effort-atomic
// request of 4 PodSets x 4,096 pods (500m each) to Provisioned=True, with
// the kwok provider creating the 256 nodes of 32 CPU it needs. The
// autoscaler is running before the clock starts.
//
//	go test -run xxx -bench AtomicRequest4x4096 -benchtime 1x ./test/integration/bench
func BenchmarkAtomicRequest4x4096(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := itest.NewProvreqEnv(b)
		group := framework.UniqueName("big")
		path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
createQPS: 500
workers: 16
nodeGroups:
- name: %[1]s
  maxSize: 400
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "32", memory: 128Gi, pods: "110"}
`, group, framework.TestNamespaceLabel, e.Namespace))
		sel := map[string]string{"pool": group}
		var sets []itest.PodSet
		for j := 0; j < 4; j++ {
			sets = append(sets, itest.PodSet{Name: fmt.Sprintf("set%d", j), Count: 4096, CPU: "500m", Selector: sel})
			e.Template("big", sets[j])
		}
		itest.StartAutoscaler(b, "autoscaler", itest.ProvreqArgs(e, path, "--kube-client-qps=200", "--kube-client-burst=400")...)
		time.Sleep(2 * time.Second) // caches synced, loops running
		b.StartTimer()
		start := time.Now()
		e.Request("big", provreq.ClassBestEffortAtomicScaleUp, nil, true, sets...)
		e.Condition("big", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 5*time.Minute)
		b.StopTimer()
		b.ReportMetric(time.Since(start).Seconds(), "s-to-provisioned")
		b.ReportMetric(float64(itest.NodesPerPool(e.Env)[group]), "nodes")
	}
}

// Benchmark100CheckCapacityRequests: 100 check-capacity requests of 2 pods
// each, created at once against 10 nodes of 32 CPU that hold them all,
// until every one is Provisioned=True.
//
//	go test -run xxx -bench 100CheckCapacity -benchtime 1x ./test/integration/bench
func Benchmark100CheckCapacityRequests(b *testing.B) {
	b.Run("qps=200", func(b *testing.B) { bench100CheckCapacity(b, "--kube-client-qps=200", "--kube-client-burst=400") })
	b.Run("qps=5 (default)", func(b *testing.B) { bench100CheckCapacity(b) })
}

func bench100CheckCapacity(b *testing.B, clientFlags ...string) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := itest.NewProvreqEnv(b)
		pool := framework.UniqueName("cc")
		for j := 0; j < 10; j++ {
			e.CreateNode(framework.MakeNode(fmt.Sprintf("%s-%d", pool, j)).Resources("32", "128Gi", "110").Label("pool", pool).Obj())
		}
		path := itest.OneGroupConfig(e.Env, framework.UniqueName("unused"), 1, "")
		sel := map[string]string{"pool": pool}
		names := make([]string, 100)
		for j := range names {
			names[j] = fmt.Sprintf("req-%03d", j)
			e.Template(names[j], itest.PodSet{Name: "main", Count: 2, CPU: "1", Selector: sel})
		}
		itest.StartAutoscaler(b, "autoscaler", itest.ProvreqArgs(e, path, clientFlags...)...)
		time.Sleep(2 * time.Second)
		b.StartTimer()
		start := time.Now()
		for _, n := range names {
			e.Request(n, provreq.ClassCheckCapacity, nil, true, itest.PodSet{Name: "main", Count: 2, CPU: "1", Selector: sel})
		}
		e.Eventually(5*time.Minute, "all 100 Provisioned", func(ctx context.Context) (bool, error) {
			list, err := e.PRs.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			done := 0
			for _, pr := range list.Items {
				if provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionProvisioned) {
					done++
				}
			}
			return done == len(names), nil
		})
		b.StopTimer()
		b.ReportMetric(time.Since(start).Seconds(), "s-to-all-provisioned")
	}
}

// BenchmarkBookedRequest: a best-effort-atomic request of 40,000 pods (1
// CPU each) is scaled up for (4,000 kwok nodes of 10 CPU) and Provisioned;
// its workload is not created, so every later loop books the 40,000 pods on
// those nodes. Reported: the time to Provisioned=True, and the mean duration
// of the loops (function="main") and of their scale-up step
// (function="scaleUp", where the booking is placed) over 20 s with the
// booking in place. pods=4000 is the same at a tenth of the size. With
// BOOKED_REQUEST_CPU_PROFILE=<file>, a CPU profile of the binary over those
// 20 s is written there.
//
//	go test -run xxx -bench 'BookedRequest/pods=40000' -benchtime 1x -timeout 20m ./test/integration/bench
func BenchmarkBookedRequest(b *testing.B) {
	for _, pods := range []int32{4000, 40000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchBookedRequest(b, pods)
			}
		})
	}
}

func benchBookedRequest(b *testing.B, pods int32) {
	b.StopTimer()
	e := itest.NewProvreqEnv(b)
	group := framework.UniqueName("booked")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
createQPS: 1000
workers: 16
nodeGroups:
- name: %[1]s
  maxSize: %[4]d
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "10", memory: 64Gi, pods: "110"}
`, group, framework.TestNamespaceLabel, e.Namespace, pods/10+100))
	set := itest.PodSet{Name: "main", Count: pods, CPU: "1", Selector: map[string]string{"pool": group}}
	e.Template("big", set)
	p := itest.StartAutoscaler(b, "autoscaler", itest.ProvreqArgs(e, path, "--kube-client-qps=200", "--kube-client-burst=400",
		"--profiling")...)
	time.Sleep(2 * time.Second) // caches synced, loops running
	start := time.Now()
	e.Request("big", provreq.ClassBestEffortAtomicScaleUp, nil, true, set)
	e.Condition("big", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 8*time.Minute)
	b.ReportMetric(time.Since(start).Seconds(), "s-to-provisioned")
	b.ReportMetric(float64(itest.NodesPerPool(e.Env)[group]), "nodes")

	time.Sleep(5 * time.Second) // the loop that saw the last node is over
	before := loopDurations(b, p)
	if out := os.Getenv("BOOKED_REQUEST_CPU_PROFILE"); out != "" {
		// A CPU profile of the binary over the measured 20 s.
		_, profile, err := p.Get(context.Background(), "/debug/pprof/profile?seconds=20")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(out, []byte(profile), 0o600); err != nil {
			b.Fatal(err)
		}
	} else {
		time.Sleep(20 * time.Second)
	}
	after := loopDurations(b, p)
	for _, f := range []string{"main", "scaleUp"} {
		n := after[f+"_count"] - before[f+"_count"]
		if n <= 0 {
			b.Fatalf("no %s run in 20 s with the booking in place", f)
		}
		b.ReportMetric((after[f+"_sum"]-before[f+"_sum"])/n, "s/"+f)
		b.ReportMetric(n, f+"-runs")
	}
	if booked := metricValue(b, p, "cluster_autoscaler_provisioning_request_booked_pods"); booked != float64(pods) {
		b.Errorf("booked pods %v, want %d", booked, pods)
	}
}

var durationSeries = regexp.MustCompile(`(?m)^cluster_autoscaler_function_duration_seconds_(sum|count)\{function="(main|scaleUp)"\} (\S+)$`)

// loopDurations reads the sums and counts of the main and scaleUp function
// durations: "main_sum", "main_count", "scaleUp_sum", "scaleUp_count".
func loopDurations(b *testing.B, p *itest.AutoscalerProcess) map[string]float64 {
	b.Helper()
	_, body, err := p.Get(context.Background(), "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range durationSeries.FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			b.Fatal(err)
		}
		out[m[2]+"_"+m[1]] = v
	}
	return out
}

// metricValue is the value of an unlabelled series.
func metricValue(b *testing.B, p *itest.AutoscalerProcess, name string) float64 {
	b.Helper()
	_, body, err := p.Get(context.Background(), "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		b.Fatalf("/metrics has no %s", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
