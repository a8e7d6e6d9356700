package faults

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestThrottledClientLosesNothing: at the default client limits (5 QPS,
// burst 10: every status write, event, Node creation and state save of the
// autoscaler and its kwok provider queues behind them) a burst of 30
// all-or-nothing ProvisioningRequests and 60 pending pods arrives at once.
// Nothing is lost: every request gets Provisioned=True and every pod runs.
func TestThrottledClientLosesNothing(t *testing.T) {
	itest.SkipUnlessSlow(t)
	throttledBurst(t, 30, 60, 3*time.Minute)
}

// TestThrottledClientLosesNothingLong is the same with 100 requests and 300
// pods:
//
//	RELIABILITY_LONG=1 go test -race -count=1 -timeout 30m -run 'TestThrottledClientLosesNothingLong' -v ./test/integration/faults/
func TestThrottledClientLosesNothingLong(t *testing.T) {
	itest.SkipUnlessSlow(t)
	skipUnlessLong(t)
	throttledBurst(t, 100, 300, 15*time.Minute)
}

func throttledBurst(t *testing.T, requests, pods int, timeout time.Duration) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	pool := framework.UniqueName("burst")
	sel := map[string]string{"pool": pool}
	// 4-CPU nodes: one of a request's 3-CPU pods, or four 1-CPU pods. Every
	// Node the kwok provider creates goes through the autoscaler's client.
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: %[4]d
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, pool, framework.TestNamespaceLabel, e.Namespace, 2*requests+pods/4+10))
	names := make([]string, requests)
	for i := range names {
		names[i] = fmt.Sprintf("req-%03d", i)
		e.Template(names[i], itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: sel})
	}
	// No --kube-client-qps or --kube-client-burst: the defaults.
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e.Env, path, "--v=2", "--enable-provisioning-requests",
		"--provisioning-request-initial-backoff-time=1s", "--provisioning-request-max-backoff-time=3s")...)
	time.Sleep(2 * time.Second) // caches synced, loops running
	start := time.Now()
	for _, n := range names {
		e.Request(n, provreq.ClassBestEffortAtomicScaleUp, nil, true, itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: sel})
	}
	itest.CreatePods(e.Env, "web", pods, "1", sel)

	var provisionedAt, runningAt time.Duration
	e.Eventually(timeout, fmt.Sprintf("all %d requests Provisioned and all %d pods Running", requests, pods),
		func(ctx context.Context) (bool, error) {
			if provisionedAt == 0 {
				list, err := e.PRs.List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				done := 0
				for _, pr := range list.Items {
					if provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionProvisioned) {
						done++
					}
					if provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionFailed) {
						return false, fmt.Errorf("request %s failed", pr.Name)
					}
				}
				if done == requests {
					provisionedAt = time.Since(start)
				}
			}
			if runningAt == 0 {
				if ok, err := itest.AllRunning(ctx, e.Env, pods); err != nil || !ok {
					return false, err
				}
				runningAt = time.Since(start)
			}
			return provisionedAt > 0, nil
		})
	_, body, err := p.Get(e.Context(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	log := p.Log.String()
	if itest.CountLines(log, "panic") > 0 {
		t.Error("the autoscaler's log mentions a panic")
	}
	t.Logf("figures: requests=%d pods=%d nodes=%d all-provisioned=%.1fs all-running=%.1fs "+
		"client-rate-limiter-wait=%.1fs over %d requests, status-write-errors=%d",
		requests, pods, itest.NodesPerPool(e.Env)[pool], provisionedAt.Seconds(), runningAt.Seconds(),
		seriesSum(body, "rest_client_rate_limiter_duration_seconds_sum"), int(seriesSum(body, "rest_client_rate_limiter_duration_seconds_count")),
		itest.CountLines(log, "Writing ProvisioningRequest status"))
}

// seriesSum sums the samples of a series (all its label sets) in a
// Prometheus text scrape.
func seriesSum(body, name string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err == nil {
			sum += v
		}
	}
	return sum
}
