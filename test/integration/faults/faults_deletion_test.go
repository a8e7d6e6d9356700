package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestFaultsDeleteNoBusyNode: three kwok groups whose calls fail (10%) and
// whose size changes lose their answer (20%): steady (three full nodes),
// churn (nodes that come and go with their pods, and fail part of 30% of
// their increases) and odd, whose two Nodes register under a provider ID
// that matches none of its instances. Twice the churn pods go and come
// back, so scale-down deletes and scale-up adds under the faults, while
// odd's instances stay "unregistered" past the provision time. The
// expected deletions (empty churn nodes) happen; no Node running one of
// the test's pods is ever deleted, and every steady and odd pod keeps
// running.
func TestFaultsDeleteNoBusyNode(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := framework.New(t)
	itest.DumpPods(e)
	steady, churn, odd := framework.UniqueName("steady"), framework.UniqueName("churn"), framework.UniqueName("odd")
	const api = "apiErrorRate: 0.1, lostResponseRate: 0.2"
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[4]s: %[5]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s, %[6]s}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[4]s: %[5]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s, partialFailureRate: 0.3, %[6]s}
- name: %[3]s
  maxSize: 10
  template:
    labels: {%[4]s: %[5]s, pool: %[3]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s, foreignProviderID: true, %[6]s}
`, steady, churn, odd, framework.TestNamespaceLabel, e.Namespace, api))
	deletions := itest.WatchNodeDeletions(e)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--v=2", "--max-node-provision-time=5s",
		"--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s", "--scale-down-delay-after-delete=0s",
		"--scale-down-delay-after-failure=1s", "--initial-node-group-backoff-duration=1s",
		"--max-node-group-backoff-duration=3s", "--kube-client-qps=50", "--kube-client-burst=100")...)
	start := time.Now()
	itest.CreatePods(e, "steady", 3, "3", map[string]string{"pool": steady})
	itest.CreatePods(e, "odd", 2, "3", map[string]string{"pool": odd})
	itest.CreatePods(e, "churn", 2, "3", map[string]string{"pool": churn})
	e.Eventually(90*time.Second, "the 7 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 7)
	})

	// Twice, the churn pods go (scale-down deletes their nodes) and come
	// back (scale-up adds nodes again), all under the faults.
	prefix := "churn"
	for cycle := 1; cycle <= 2; cycle++ {
		for i := 0; i < 2; i++ {
			if err := e.Client.CoreV1().Pods(e.Namespace).Delete(e.Context(), fmt.Sprintf("%s-%d", prefix, i),
				metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
		}
		e.Eventually(90*time.Second, fmt.Sprintf("cycle %d: the empty churn nodes scaled down", cycle), func(context.Context) (bool, error) {
			return itest.NodesPerPool(e)[churn] == 0, nil
		})
		prefix = fmt.Sprintf("churn%d", cycle)
		itest.CreatePods(e, prefix, 2, "3", map[string]string{"pool": churn})
		e.Eventually(90*time.Second, fmt.Sprintf("cycle %d: the churn pods Running again", cycle), func(ctx context.Context) (bool, error) {
			return itest.AllRunning(ctx, e, 7)
		})
	}
	// Odd's instances have looked unregistered for far longer than the
	// provision time by now; give the cleanup a few more loops.
	time.Sleep(5 * time.Second)

	for _, d := range deletions.Busy() {
		t.Errorf("a Node running the test's pods was deleted: %s", d)
	}
	if got := itest.NodesPerPool(e); got[steady] < 3 || got[odd] != 2 {
		t.Errorf("nodes per group %v, want at least 3 in %s and odd's 2 kept", got, steady)
	}
	if ok, err := itest.AllRunning(e.Context(), e, 7); err != nil || !ok {
		t.Errorf("not all 7 pods Running at the end (%v)", err)
	}
	expected := 0
	for _, d := range deletions.All() {
		if d.Pool == churn {
			expected++
		}
	}
	if expected == 0 {
		t.Error("no churn node was deleted: the test saw no deletion at all")
	}
	log := p.Log.String()
	kept := itest.CountLines(log, "Not deleting an unregistered instance") + itest.CountLines(log, "Unregistered-instance circuit breaker open")
	if kept == 0 {
		t.Error("odd's instances never looked long unregistered: the test did not put them at risk")
	}
	if itest.CountLines(log, "panic") > 0 {
		t.Error("the autoscaler's log mentions a panic")
	}
	t.Logf("figures: duration=%.1fs node-deletions=%d (churn, expected %d; of Nodes running pods %d) failed-loops=%d "+
		"simulated-api-errors=%d lost-responses=%d look-alike-kept=%d breaker-open-loops=%d",
		time.Since(start).Seconds(), len(deletions.All()), expected, len(deletions.Busy()), itest.CountLines(log, `"Loop failed"`),
		itest.CountLines(log, "simulated API error"), itest.CountLines(log, "simulated lost response"),
		itest.CountLines(log, "Not deleting an unregistered instance"), itest.CountLines(log, "Unregistered-instance circuit breaker open"))
}
