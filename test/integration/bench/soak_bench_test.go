package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// BenchmarkSoak runs the real binary for SOAK_DURATION (default 30m) while a
// Deployment of 1-CPU pods on a kwok group of 4-CPU nodes steps every
// SOAK_STEP (default 90s) through 40, 12, 0 and 24 replicas, so that the
// autoscaler keeps scaling up, draining and removing nodes
// (--scale-down-unneeded-time=30s, --scale-down-delay-after-add=30s, the
// default --scan-interval=10s). Every SOAK_SAMPLE (default 30s) it records
// the process's resident memory (VmRSS) and go_goroutines, and it reports
// the first, last and largest values and the slope of a least-squares line
// through the samples after a warm-up (a quarter of the run, at most 3
// minutes); the slope of the Go heap in use (go_memstats_heap_inuse_bytes)
// too, for information.
//
// It fails when, over the samples after the warm-up, the line rises by
// more than max(32 MiB, 15% of the mean) of RSS or max(20, 10% of the mean)
// goroutines, or when the workload did not make the autoscaler add and
// remove nodes. Not part of `make test`:
//
//	go test -run xxx -bench Soak -benchtime 1x -timeout 45m ./test/integration/bench
//	SOAK_DURATION=2m SOAK_STEP=30s go test -run xxx -bench Soak -benchtime 1x ./test/integration/bench
//
// SOAK_LOG=<file> keeps the autoscaler's log.
func BenchmarkSoak(b *testing.B) {
	duration := envDuration(b, "SOAK_DURATION", 30*time.Minute)
	step := envDuration(b, "SOAK_STEP", 90*time.Second)
	every := envDuration(b, "SOAK_SAMPLE", 30*time.Second)
	for i := 0; i < b.N; i++ {
		benchSoak(b, duration, step, every)
	}
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// soakSample is one reading of the autoscaler process.
type soakSample struct {
	at         time.Duration // since the start
	rssMiB     float64
	goroutines float64
	heapMiB    float64
}

func benchSoak(b *testing.B, duration, step, every time.Duration) {
	b.StopTimer()
	e := framework.New(b)
	group := framework.UniqueName("soak")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 20
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, group, framework.TestNamespaceLabel, e.Namespace))
	p := itest.StartAutoscaler(b, "autoscaler", "--kubeconfig="+e.Kubeconfig, "--namespace="+e.Namespace,
		"--cloud-provider=kwok", "--kwok-provider-enabled", "--cloud-config="+path, "--v=2",
		"--scale-down-unneeded-time=30s", "--scale-down-delay-after-add=30s")
	defer func() {
		if path := os.Getenv("SOAK_LOG"); path != "" {
			_ = os.WriteFile(path, []byte(p.Log.String()), 0o600)
		}
	}()
	e.Eventually(30*time.Second, "the autoscaler looping", func(context.Context) (bool, error) {
		return p.Log.Contains("Informer caches synced"), nil
	})
	itest.Deployment(e, "soak", 0, map[string]string{"pool": group})
	b.Logf("soak of %v, a step every %v, a sample every %v; load average %s", duration, step, every, loadAverage())

	sizes := []int32{40, 12, 0, 24}
	start := time.Now()
	b.StartTimer()
	var samples []soakSample
	nextStep, nextSample, steps := start, start, 0
	for time.Since(start) < duration {
		now := time.Now()
		if !now.Before(nextStep) {
			setReplicas(b, e, "soak", sizes[steps%len(sizes)])
			steps++
			nextStep = nextStep.Add(step)
		}
		if !now.Before(nextSample) {
			samples = append(samples, sampleProcess(b, p, now.Sub(start)))
			nextSample = nextSample.Add(every)
		}
		select {
		case <-p.Done:
			b.Fatalf("the autoscaler exited during the soak: %v", p.ExitErr)
		case <-time.After(time.Until(earliest(nextStep, nextSample, start.Add(duration)))):
		}
	}
	samples = append(samples, sampleProcess(b, p, time.Since(start)))
	b.StopTimer()
	v, err := itest.ScrapeValues(e.Context(), p)
	if err != nil {
		b.Fatal(err)
	}
	up, down := itest.SumOf(v, "cluster_autoscaler_scaled_up_nodes_total"), itest.SumOf(v, "cluster_autoscaler_scaled_down_nodes_total")
	loops := v[mainCount]
	b.Logf("%d steps, %.0f loops, %.0f nodes added, %.0f removed; load average %s", steps, loops, up, down, loadAverage())
	// One line (benchmark logs past 10 lines are cut without -v).
	var b2 strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b2, " %.0fs:%.1f/%.1f/%.0f", s.at.Seconds(), s.rssMiB, s.heapMiB, s.goroutines)
	}
	b.Logf("samples (time: RSS MiB / heap in use MiB / goroutines):%s", b2.String())

	warm := min(3*time.Minute, duration/4)
	var xs, rss, gor, heap []float64
	for _, s := range samples {
		if s.at >= warm {
			xs = append(xs, s.at.Hours())
			rss = append(rss, s.rssMiB)
			gor = append(gor, s.goroutines)
			heap = append(heap, s.heapMiB)
		}
	}
	first, last := samples[0], samples[len(samples)-1]
	maxRSS, maxGor := 0.0, 0.0
	for _, s := range samples {
		maxRSS, maxGor = math.Max(maxRSS, s.rssMiB), math.Max(maxGor, s.goroutines)
	}
	rssSlope, gorSlope := linearSlope(xs, rss), linearSlope(xs, gor)
	b.ReportMetric(first.rssMiB, "RSS-first-MiB")
	b.ReportMetric(last.rssMiB, "RSS-last-MiB")
	b.ReportMetric(maxRSS, "RSS-max-MiB")
	b.ReportMetric(rssSlope, "RSS-slope-MiB/h")
	b.ReportMetric(first.goroutines, "goroutines-first")
	b.ReportMetric(last.goroutines, "goroutines-last")
	b.ReportMetric(maxGor, "goroutines-max")
	b.ReportMetric(gorSlope, "goroutines-slope/h")
	b.ReportMetric(linearSlope(xs, heap), "heap-inuse-slope-MiB/h")
	b.ReportMetric(up, "nodes-added")
	b.ReportMetric(down, "nodes-removed")
	b.ReportMetric(loops, "loops")

	if up == 0 || down == 0 {
		b.Errorf("the workload did not move the cluster: %.0f nodes added, %.0f removed", up, down)
	}
	if len(xs) < 2 {
		b.Fatalf("%d samples after the %v warm-up: run longer or sample more often", len(xs), warm)
	}
	span := xs[len(xs)-1] - xs[0]
	if grow, limit := rssSlope*span, math.Max(32, 0.15*mean(rss)); grow > limit {
		b.Errorf("RSS rose by %.1f MiB along its trend over %.0f minutes (tolerance %.1f MiB)", grow, span*60, limit)
	}
	if grow, limit := gorSlope*span, math.Max(20, 0.10*mean(gor)); grow > limit {
		b.Errorf("goroutines rose by %.1f along their trend over %.0f minutes (tolerance %.1f)", grow, span*60, limit)
	}
}

func earliest(ts ...time.Time) time.Time {
	out := ts[0]
	for _, t := range ts[1:] {
		if t.Before(out) {
			out = t
		}
	}
	return out
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func setReplicas(b *testing.B, e *framework.Env, name string, n int32) {
	b.Helper()
	_, err := e.Client.AppsV1().Deployments(e.Namespace).UpdateScale(e.Context(), name,
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
			Spec: autoscalingv1.ScaleSpec{Replicas: n}}, metav1.UpdateOptions{})
	if err != nil {
		b.Fatalf("scaling %s to %d: %v", name, n, err)
	}
}

// sampleProcess reads VmRSS from /proc and the goroutines and heap from
// the autoscaler's /metrics.
func sampleProcess(b *testing.B, p *itest.AutoscalerProcess, at time.Duration) soakSample {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := itest.ScrapeValues(ctx, p)
	if err != nil {
		b.Fatalf("sampling the autoscaler: %v", err)
	}
	return soakSample{at: at, rssMiB: procStatusMiB(p.Cmd.Process.Pid, "VmRSS"), goroutines: v["go_goroutines"],
		heapMiB: v["go_memstats_heap_inuse_bytes"] / (1 << 20)}
}
