package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// Helpers of the long-running benchmarks (scale, soak): numeric reads of the
// autoscaler's /metrics, the machine's load, simple statistics.

// loadAverage is the machine's 1, 5 and 15 minute load averages as
// /proc/loadavg writes them.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// load1 is the 1-minute load average, -1 when unknown.
func load1() float64 {
	f := strings.Fields(loadAverage())
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// procStatusMiB reads a kB field of /proc/<pid>/status (VmRSS, VmHWM) in MiB.
func procStatusMiB(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

// percentile is the nearest-rank q-quantile (0 < q <= 1) of values.
func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	rank := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// linearSlope is the least-squares slope of ys over xs.
func linearSlope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// loopSampler polls the autoscaler's /metrics every 2 s and turns the
// growth of the function_duration_seconds sums and counts into per-loop
// figures: one duration per loop (when a poll saw several loops end, each
// gets their mean), the time per function, and the API requests made.
type loopSampler struct {
	p    *itest.AutoscalerProcess
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	first map[string]float64
	last  map[string]float64
	loops []float64 // seconds, in order
	// inexact counts the loops whose duration is a mean over several loops
	// seen by one poll.
	inexact int
}

func startLoopSampler(t testing.TB, p *itest.AutoscalerProcess) *loopSampler {
	s := &loopSampler{p: p, stop: make(chan struct{}), done: make(chan struct{})}
	first, err := itest.ScrapeValues(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	s.first, s.last = first, first
	go s.run()
	t.Cleanup(s.close)
	return s
}

func (s *loopSampler) run() {
	defer close(s.done)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := itest.ScrapeValues(ctx, s.p)
		cancel()
		if err != nil {
			continue
		}
		s.mu.Lock()
		n := v[mainCount] - s.last[mainCount]
		if n > 0 {
			d := (v[mainSum] - s.last[mainSum]) / n
			for i := 0; i < int(n); i++ {
				s.loops = append(s.loops, d)
			}
			if n > 1 {
				s.inexact += int(n)
			}
		}
		s.last = v
		s.mu.Unlock()
	}
}

// close stops the polling (idempotent); the figures stay readable.
func (s *loopSampler) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

const (
	mainSum   = `cluster_autoscaler_function_duration_seconds_sum{function="main"}`
	mainCount = `cluster_autoscaler_function_duration_seconds_count{function="main"}`
)

// loopFigures summarises what the sampler saw between its start and close.
type loopFigures struct {
	loops         []float64
	inexact       int
	requests      float64            // rest_client_requests_total
	gcs           float64            // garbage collections (go_gc_duration_seconds_count)
	requestsBy    map[string]float64 // by method
	functionMeans map[string]float64 // seconds per run, by function label
}

func (s *loopSampler) figures() loopFigures {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := loopFigures{loops: append([]float64(nil), s.loops...), inexact: s.inexact,
		requestsBy: map[string]float64{}, functionMeans: map[string]float64{}}
	f.requests = itest.SumOf(s.last, "rest_client_requests_total") - itest.SumOf(s.first, "rest_client_requests_total")
	f.gcs = s.last["go_gc_duration_seconds_count"] - s.first["go_gc_duration_seconds_count"]
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		l := `method="` + m + `"`
		if d := itest.SumOf(s.last, "rest_client_requests_total", l) - itest.SumOf(s.first, "rest_client_requests_total", l); d > 0 {
			f.requestsBy[m] = d
		}
	}
	for series, sum := range s.last {
		fn, ok := strings.CutPrefix(series, `cluster_autoscaler_function_duration_seconds_sum{function="`)
		if !ok {
			continue
		}
		fn = strings.TrimSuffix(fn, `"}`)
		countKey := `cluster_autoscaler_function_duration_seconds_count{function="` + fn + `"}`
		if n := s.last[countKey] - s.first[countKey]; n > 0 {
			f.functionMeans[fn] = (sum - s.first[series]) / n
		}
	}
	return f
}
