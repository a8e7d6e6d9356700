package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// BenchmarkAtomicRequest4x4096: from the creation of one best-effort-atomic
// request of 4 PodSets x 4,096 pods (500m each) to Provisioned=True, with
// the kwok provider creating the 256 nodes of 32 CPU it needs. The
// autoscaler is running before the clock starts.
//
//	go test -run xxx -bench AtomicRequest4x4096 -benchtime 1x ./test/integration
func BenchmarkAtomicRequest4x4096(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newProvreqEnv(b)
		group := framework.UniqueName("big")
		path := writeKwokConfig(e.Env, fmt.Sprintf(`
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
		var sets []podSet
		for j := 0; j < 4; j++ {
			sets = append(sets, podSet{name: fmt.Sprintf("set%d", j), count: 4096, cpu: "500m", selector: sel})
			e.template("big", sets[j])
		}
		startAutoscaler(b, "autoscaler", provreqArgs(e, path, "--kube-client-qps=200", "--kube-client-burst=400")...)
		time.Sleep(2 * time.Second) // caches synced, loops running
		b.StartTimer()
		start := time.Now()
		e.request("big", provreq.ClassBestEffortAtomicScaleUp, nil, true, sets...)
		e.condition("big", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 5*time.Minute)
		b.StopTimer()
		b.ReportMetric(time.Since(start).Seconds(), "s-to-provisioned")
		b.ReportMetric(float64(nodesPerPool(e.Env)[group]), "nodes")
	}
}

// Benchmark100CheckCapacityRequests: 100 check-capacity requests of 2 pods
// each, created at once against 10 nodes of 32 CPU that hold them all,
// until every one is Provisioned=True.
//
//	go test -run xxx -bench 100CheckCapacity -benchtime 1x ./test/integration
func Benchmark100CheckCapacityRequests(b *testing.B) {
	b.Run("qps=200", func(b *testing.B) { bench100CheckCapacity(b, "--kube-client-qps=200", "--kube-client-burst=400") })
	b.Run("qps=5 (default)", func(b *testing.B) { bench100CheckCapacity(b) })
}

func bench100CheckCapacity(b *testing.B, clientFlags ...string) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newProvreqEnv(b)
		pool := framework.UniqueName("cc")
		for j := 0; j < 10; j++ {
			e.CreateNode(framework.MakeNode(fmt.Sprintf("%s-%d", pool, j)).Resources("32", "128Gi", "110").Label("pool", pool).Obj())
		}
		path := oneGroupConfig(e.Env, framework.UniqueName("unused"), 1, "")
		sel := map[string]string{"pool": pool}
		names := make([]string, 100)
		for j := range names {
			names[j] = fmt.Sprintf("req-%03d", j)
			e.template(names[j], podSet{name: "main", count: 2, cpu: "1", selector: sel})
		}
		startAutoscaler(b, "autoscaler", provreqArgs(e, path, clientFlags...)...)
		time.Sleep(2 * time.Second)
		b.StartTimer()
		start := time.Now()
		for _, n := range names {
			e.request(n, provreq.ClassCheckCapacity, nil, true, podSet{name: "main", count: 2, cpu: "1", selector: sel})
		}
		e.Eventually(5*time.Minute, "all 100 Provisioned", func(ctx context.Context) (bool, error) {
			list, err := e.prs.List(ctx, metav1.ListOptions{})
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
