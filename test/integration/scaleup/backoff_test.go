package scaleup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestOutOfCapacityGroupIsBackedOffAndTheNextGroupChosen: the preferred
// group (by the priority expander) runs out of capacity after one instance.
// Its failed instances are seen in the next loop, it is backed off at once,
// and the remaining pods get nodes of the fallback group; all pods run.
func TestOutOfCapacityGroupIsBackedOffAndTheNextGroupChosen(t *testing.T) {
	e := framework.New(t)
	path, preferred, fallback := itest.OutOfCapacityGroups(e)
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 8, "1", map[string]string{"shape": "standard"}) // two 4-CPU nodes

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=priority", "--emit-per-nodegroup-metrics")...)
	e.Eventually(60*time.Second, "all 8 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 8)
	})
	got := itest.NodesPerPool(e)
	if got[preferred] != 1 || got[fallback] < 1 {
		t.Errorf("nodes per group = %v, want 1 in %s (its capacity) and the rest in %s", got, preferred, fallback)
	}
	if !p.Log.Written(`"Node group backed off"`) || !p.Log.Written(`errorCode="STOCKOUT"`) {
		t.Error("the back-off is not logged with its error code")
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
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
