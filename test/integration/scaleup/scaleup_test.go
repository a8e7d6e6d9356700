package scaleup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestScaleUpChoosesGroupsAndPodsRun: pods pinned by nodeSelector to two
// different groups get both groups scaled in one loop, kube-scheduler binds
// them to the new kwok nodes, and later loops do not scale again.
func TestScaleUpChoosesGroupsAndPodsRun(t *testing.T) {
	e := framework.New(t)
	path, small, large := itest.ScaleUpConfig(e)
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 10, "1", map[string]string{"pool": small})  // 3 small nodes (4+4+2)
	itest.CreatePods(e, "batch", 3, "8", map[string]string{"pool": large}) // 2 large nodes (2+1)

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste")...)
	e.Eventually(60*time.Second, "all 13 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 13)
	})
	got := itest.NodesPerPool(e)
	if got[small] != 3 || got[large] != 2 {
		t.Errorf("nodes per group = %v, want %s:3 %s:2", got, small, large)
	}
	// Several more loops (scan interval 1s) must not add anything.
	time.Sleep(4 * time.Second)
	if again := itest.NodesPerPool(e); again[small] != 3 || again[large] != 2 {
		t.Errorf("nodes changed after the pods ran: %v", again)
	}
	if !p.Log.Written(`"Scaled up node group"`) {
		t.Error("no scale-up logged")
	}
	itest.PodEvent(e, "TriggeredScaleUp", fmt.Sprintf("pod triggered scale-up: [{%s 0->3 (max: 10)}]", small))
	_, body, _ := p.Get(e.Context(), "/metrics")
	if want := "cluster_autoscaler_scaled_up_nodes_total{dra_drivers=\"\",gpu_name=\"\",gpu_resource_name=\"\"} 5"; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

// TestScaleUpPicksTheLeastWastefulGroup: pods that fit either group go to
// the one the least-waste expander prefers: 10 one-CPU pods waste less on
// three 4-CPU nodes than on one 16-CPU node.
func TestScaleUpPicksTheLeastWastefulGroup(t *testing.T) {
	e := framework.New(t)
	path, small, large := itest.ScaleUpConfig(e)
	itest.CreatePods(e, "web", 10, "1", nil)
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste")...)
	e.Eventually(60*time.Second, "all 10 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 10)
	})
	if got := itest.NodesPerPool(e); got[small] != 3 || got[large] != 0 {
		t.Errorf("nodes per group = %v, want %s:3 and no %s", got, small, large)
	}
}

// TestScaleUpRespectsMaxNodesTotal: --max-nodes-total caps the scale-up even
// though pods stay pending.
func TestScaleUpRespectsMaxNodesTotal(t *testing.T) {
	e := framework.New(t)
	path, small, _ := itest.ScaleUpConfig(e)
	itest.CreatePods(e, "web", 10, "1", map[string]string{"pool": small}) // would need 3 nodes
	existing, _ := itest.ClusterCapacity(e)
	maxTotal := existing + 2
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, fmt.Sprintf("--max-nodes-total=%d", maxTotal))...)
	e.Eventually(60*time.Second, "8 pods Running on 2 nodes", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 8)
	})
	time.Sleep(3 * time.Second)
	if got := itest.NodesPerPool(e)[small]; got != 2 {
		t.Errorf("%d nodes in %s, want 2 (max-nodes-total)", got, small)
	}
	itest.PodEvent(e, "NotTriggerScaleUp", fmt.Sprintf("pod didn't trigger scale-up: max total nodes in cluster reached (--max-nodes-total=%d)", maxTotal))
}

// TestScaleUpHonoursTaintsAndAffinity: pods that tolerate a tainted group and
// require it by node affinity get that group; pods without the toleration
// never get it, even though it would be the larger, emptier choice.
func TestScaleUpHonoursTaintsAndAffinity(t *testing.T) {
	e := framework.New(t)
	dedicated, plain := framework.UniqueName("dedicated"), framework.UniqueName("plain")
	cfg := fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    taints: [{key: dedicated, value: batch, effect: NoSchedule}]
    capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, dedicated, plain, framework.TestNamespaceLabel, e.Namespace)
	path := itest.WriteKwokConfig(e, cfg)
	itest.DumpPods(e)
	for i := 0; i < 4; i++ {
		pod := framework.MakePod(e.Namespace, fmt.Sprintf("batch-%d", i)).Req("4", "1Gi").Obj()
		pod.Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpEqual, Value: "batch",
			Effect: apiv1.TaintEffectNoSchedule}}
		pod.Spec.Affinity = &apiv1.Affinity{NodeAffinity: &apiv1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{
				MatchExpressions: []apiv1.NodeSelectorRequirement{{Key: "pool", Operator: apiv1.NodeSelectorOpIn, Values: []string{dedicated}}},
			}}}}}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Only plain nodes can take these: they do not tolerate the taint.
	itest.CreatePods(e, "web", 6, "1", nil)
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste")...)
	e.Eventually(60*time.Second, "all 10 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 10)
	})
	if got := itest.NodesPerPool(e); got[dedicated] != 1 || got[plain] != 2 {
		t.Errorf("nodes per group = %v, want %s:1 (4 x 4 CPU) and %s:2 (6 x 1 CPU)", got, dedicated, plain)
	}
}

// TestScaleUpRespectsCoresTotal: --cores-total caps the cores the scale-up may add.
func TestScaleUpRespectsCoresTotal(t *testing.T) {
	e := framework.New(t)
	path, small, _ := itest.ScaleUpConfig(e)
	itest.CreatePods(e, "web", 10, "1", map[string]string{"pool": small}) // would need 3 nodes of 4 CPU
	_, cores := itest.ClusterCapacity(e)
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, fmt.Sprintf("--cores-total=0:%d", cores+8))...)
	e.Eventually(60*time.Second, "8 pods Running on 2 nodes", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 8)
	})
	time.Sleep(3 * time.Second)
	if got := itest.NodesPerPool(e)[small]; got != 2 {
		t.Errorf("%d nodes in %s, want 2 (cores-total leaves room for 8 cores)", got, small)
	}
	itest.PodEvent(e, "NotTriggerScaleUp", fmt.Sprintf("max cluster cpu limit reached (--cores-total max %d)", cores+8))
}

// TestEnforceNodeGroupMinSize: with --enforce-node-group-min-size a group
// below its min size is raised to it without any pending pod; without the
// flag it is left alone.
func TestEnforceNodeGroupMinSize(t *testing.T) {
	e := framework.New(t)
	kept, raised := framework.UniqueName("kept"), framework.UniqueName("raised")
	path := itest.GroupsConfig(e, raised+":2")
	other := itest.GroupsConfig(e, kept+":2")
	p := itest.StartAutoscaler(t, "with", itest.ScaleUpArgs(e, path, "--enforce-node-group-min-size")...)
	e.Eventually(30*time.Second, "the group raised to its min size", func(context.Context) (bool, error) {
		return itest.NodesPerPool(e)[raised] == 2, nil
	})
	if !p.Log.Written("Raised a node group to its min size") {
		t.Error("the raise is not logged")
	}
	if code := p.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	q := itest.StartAutoscaler(t, "without", append(itest.ScaleUpArgs(e, other), "--leader-elect=false")...)
	time.Sleep(4 * time.Second)
	if got := itest.NodesPerPool(e)[kept]; got != 0 || q.Log.Contains("Raised a node group") {
		t.Errorf("without the flag the group got %d nodes", got)
	}
}
