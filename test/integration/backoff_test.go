package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestOutOfCapacityGroupIsBackedOffAndTheNextGroupChosen: the preferred
// group (by the priority expander) runs out of capacity after one instance.
// Its failed instances are seen in the next loop, it is backed off at once,
// and the remaining pods get nodes of the fallback group; all pods run.
func TestOutOfCapacityGroupIsBackedOffAndTheNextGroupChosen(t *testing.T) {
	e := framework.New(t)
	path, preferred, fallback := outOfCapacityGroups(e)
	dumpPods(e)
	createPods(e, "web", 8, "1", map[string]string{"shape": "standard"}) // two 4-CPU nodes

	p := startAutoscaler(t, "autoscaler", scaleUpArgs(e, path, "--expander=priority", "--emit-per-nodegroup-metrics")...)
	e.Eventually(60*time.Second, "all 8 pods Running", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 8)
	})
	got := nodesPerPool(e)
	if got[preferred] != 1 || got[fallback] < 1 {
		t.Errorf("nodes per group = %v, want 1 in %s (its capacity) and the rest in %s", got, preferred, fallback)
	}
	if !p.log.Contains(`"Node group backed off"`) || !p.log.Contains(`errorCode="STOCKOUT"`) {
		t.Error("the back-off is not logged with its error code")
	}
	_, body, _ := p.get(e.Context(), "/metrics")
	if !strings.Contains(body, `cluster_autoscaler_failed_scale_ups_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="cloudProviderError"} 1`) {
		t.Errorf("failed_scale_ups_total does not count the out-of-capacity failure")
	}
	// --emit-per-nodegroup-metrics: the back-off and the sizes per group.
	for _, want := range []string{
		fmt.Sprintf(`cluster_autoscaler_node_group_backoff_status{node_group=%q,reason="STOCKOUT"} 1`, preferred),
		fmt.Sprintf(`cluster_autoscaler_node_group_max_count{node_group=%q} 10`, fallback),
		fmt.Sprintf(`cluster_autoscaler_node_group_healthiness{node_group=%q} 1`, fallback),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// priorityConfigMap is the priority expander's ConfigMap with the given priorities.
func priorityConfigMap(e *framework.Env, priorities string) *apiv1.ConfigMap {
	return &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-autoscaler-priority-expander", Namespace: e.Namespace},
		Data:       map[string]string{"priorities": priorities},
	}
}

// outOfCapacityGroups writes a kwok config of two like groups, preferred
// (out of capacity after one instance) and fallback, and the priority
// expander's ConfigMap that prefers the first; it returns the config's path
// and the group names.
func outOfCapacityGroups(e *framework.Env) (path, preferred, fallback string) {
	e.T.Helper()
	preferred, fallback = framework.UniqueName("preferred"), framework.UniqueName("fallback")
	cfg := fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, shape: standard}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s, outOfCapacityAfter: 1}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, shape: standard}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, preferred, fallback, framework.TestNamespaceLabel, e.Namespace)
	path = writeKwokConfig(e, cfg)
	priorities := priorityConfigMap(e, fmt.Sprintf("20:\n  - ^%s$\n10:\n  - .*\n", preferred))
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), priorities, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	return path, preferred, fallback
}
