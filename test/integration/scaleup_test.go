package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// scaleUpConfig writes a kwok provider config with a small (4 CPU) and a
// large (16 CPU, label pool=large-<suffix>) group and returns its path and
// the group names.
func scaleUpConfig(e *framework.Env) (path, small, large string) {
	small, large = framework.UniqueName("small"), framework.UniqueName("large")
	cfg := fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  minSize: 0
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, small, large, framework.TestNamespaceLabel, e.Namespace)
	return writeKwokConfig(e, cfg), small, large
}

// writeKwokConfig writes a kwok provider config for --cloud-config and returns its path.
func writeKwokConfig(e *framework.Env, cfg string) string {
	e.T.Helper()
	path := filepath.Join(e.T.TempDir(), "kwok.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.T.Fatal(err)
	}
	return path
}

// clusterCapacity counts the nodes already in the cluster and their cores.
func clusterCapacity(e *framework.Env) (nodes int, cores int64) {
	e.T.Helper()
	list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	for _, n := range list.Items {
		cores += n.Status.Capacity.Cpu().Value()
	}
	return len(list.Items), cores
}

// scaleUpArgs are the autoscaler's arguments for a config-only kwok provider.
func scaleUpArgs(e *framework.Env, configPath string, extra ...string) []string {
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + configPath, "--scan-interval=1s", "--v=4"}
	return append(args, extra...)
}

func createPods(e *framework.Env, prefix string, n int, cpu string, nodeSelector map[string]string) {
	e.T.Helper()
	for i := 0; i < n; i++ {
		b := framework.MakePod(e.Namespace, fmt.Sprintf("%s-%d", prefix, i)).Req(cpu, "1Gi")
		for k, v := range nodeSelector {
			b.NodeSelector(k, v)
		}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), b.Obj(), metav1.CreateOptions{}); err != nil {
			e.T.Fatal(err)
		}
	}
}

// nodesPerPool counts the nodes of each pool label value.
func nodesPerPool(e *framework.Env) map[string]int {
	e.T.Helper()
	list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: framework.TestNamespaceLabel + "=" + e.Namespace})
	if err != nil {
		e.T.Fatal(err)
	}
	out := map[string]int{}
	for _, n := range list.Items {
		out[n.Labels["pool"]]++
	}
	return out
}

// dumpPods logs every pod of the test with its node, phase and scheduling
// message, and every node with its allocatable cpu, when the test fails.
func dumpPods(e *framework.Env) {
	e.T.Cleanup(func() {
		if !e.T.Failed() {
			return
		}
		ctx := context.Background()
		pods, _ := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			msg := ""
			for _, c := range p.Status.Conditions {
				if c.Type == apiv1.PodScheduled && c.Status != apiv1.ConditionTrue {
					msg = c.Message
				}
			}
			e.T.Logf("pod %s node=%q phase=%s %s", p.Name, p.Spec.NodeName, p.Status.Phase, msg)
		}
		nodes, _ := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			e.T.Logf("node %s pool=%s cpu=%s taints=%v", n.Name, n.Labels["pool"], n.Status.Allocatable.Cpu(), n.Spec.Taints)
		}
	})
}

// podEvent waits for an event of reason on a pod of the test whose message contains text.
func podEvent(e *framework.Env, reason, text string) {
	e.T.Helper()
	e.Eventually(20*time.Second, "event "+reason+" mentioning "+text, func(ctx context.Context) (bool, error) {
		events, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == reason && ev.InvolvedObject.Kind == "Pod" && strings.Contains(ev.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
}

func allRunning(ctx context.Context, e *framework.Env, want int) (bool, error) {
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == apiv1.PodRunning {
			running++
		}
	}
	return running == want, nil
}

// TestScaleUpChoosesGroupsAndPodsRun: pods pinned by nodeSelector to two
// different groups get both groups scaled in one loop, kube-scheduler binds
// them to the new kwok nodes, and later loops do not scale again.
func TestScaleUpChoosesGroupsAndPodsRun(t *testing.T) {
	e := framework.New(t)
	path, small, large := scaleUpConfig(e)
	dumpPods(e)
	createPods(e, "web", 10, "1", map[string]string{"pool": small})  // 3 small nodes (4+4+2)
	createPods(e, "batch", 3, "8", map[string]string{"pool": large}) // 2 large nodes (2+1)

	p := startAutoscaler(t, "autoscaler", scaleUpArgs(e, path, "--expander=least-waste")...)
	e.Eventually(60*time.Second, "all 13 pods Running", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 13)
	})
	got := nodesPerPool(e)
	if got[small] != 3 || got[large] != 2 {
		t.Errorf("nodes per group = %v, want %s:3 %s:2", got, small, large)
	}
	// Several more loops (scan interval 1s) must not add anything.
	time.Sleep(4 * time.Second)
	if again := nodesPerPool(e); again[small] != 3 || again[large] != 2 {
		t.Errorf("nodes changed after the pods ran: %v", again)
	}
	if !p.log.Contains(`"Scaled up node group"`) {
		t.Error("no scale-up logged")
	}
	podEvent(e, "TriggeredScaleUp", fmt.Sprintf("pod triggered scale-up: [{%s 0->3 (max: 10)}]", small))
	_, body, _ := p.get(e.Context(), "/metrics")
	if want := "cluster_autoscaler_scaled_up_nodes_total{dra_drivers=\"\",gpu_name=\"\",gpu_resource_name=\"\"} 5"; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

// TestScaleUpPicksTheLeastWastefulGroup: pods that fit either group go to
// the one the least-waste expander prefers: 10 one-CPU pods waste less on
// three 4-CPU nodes than on one 16-CPU node.
func TestScaleUpPicksTheLeastWastefulGroup(t *testing.T) {
	e := framework.New(t)
	path, small, large := scaleUpConfig(e)
	createPods(e, "web", 10, "1", nil)
	startAutoscaler(t, "autoscaler", scaleUpArgs(e, path, "--expander=least-waste")...)
	e.Eventually(60*time.Second, "all 10 pods Running", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 10)
	})
	if got := nodesPerPool(e); got[small] != 3 || got[large] != 0 {
		t.Errorf("nodes per group = %v, want %s:3 and no %s", got, small, large)
	}
}

// TestScaleUpRespectsMaxNodesTotal: --max-nodes-total caps the scale-up even
// though pods stay pending.
func TestScaleUpRespectsMaxNodesTotal(t *testing.T) {
	e := framework.New(t)
	path, small, _ := scaleUpConfig(e)
	createPods(e, "web", 10, "1", map[string]string{"pool": small}) // would need 3 nodes
	existing, _ := clusterCapacity(e)
	maxTotal := existing + 2
	startAutoscaler(t, "autoscaler", scaleUpArgs(e, path, fmt.Sprintf("--max-nodes-total=%d", maxTotal))...)
	e.Eventually(60*time.Second, "8 pods Running on 2 nodes", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 8)
	})
	time.Sleep(3 * time.Second)
	if got := nodesPerPool(e)[small]; got != 2 {
		t.Errorf("%d nodes in %s, want 2 (max-nodes-total)", got, small)
	}
	podEvent(e, "NotTriggerScaleUp", fmt.Sprintf("pod didn't trigger scale-up: max total nodes in cluster reached (--max-nodes-total=%d)", maxTotal))
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
	path := writeKwokConfig(e, cfg)
	dumpPods(e)
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
	createPods(e, "web", 6, "1", nil)
	startAutoscaler(t, "autoscaler", scaleUpArgs(e, path, "--expander=least-waste")...)
	e.Eventually(60*time.Second, "all 10 pods Running", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 10)
	})
	if got := nodesPerPool(e); got[dedicated] != 1 || got[plain] != 2 {
		t.Errorf("nodes per group = %v, want %s:1 (4 x 4 CPU) and %s:2 (6 x 1 CPU)", got, dedicated, plain)
	}
}

// TestScaleUpRespectsCoresTotal: --cores-total caps the cores the scale-up may add.
func TestScaleUpRespectsCoresTotal(t *testing.T) {
	e := framework.New(t)
	path, small, _ := scaleUpConfig(e)
	createPods(e, "web", 10, "1", map[string]string{"pool": small}) // would need 3 nodes of 4 CPU
	_, cores := clusterCapacity(e)
	startAutoscaler(t, "autoscaler", scaleUpArgs(e, path, fmt.Sprintf("--cores-total=0:%d", cores+8))...)
	e.Eventually(60*time.Second, "8 pods Running on 2 nodes", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 8)
	})
	time.Sleep(3 * time.Second)
	if got := nodesPerPool(e)[small]; got != 2 {
		t.Errorf("%d nodes in %s, want 2 (cores-total leaves room for 8 cores)", got, small)
	}
	podEvent(e, "NotTriggerScaleUp", fmt.Sprintf("max cluster cpu limit reached (--cores-total max %d)", cores+8))
}

// TestEnforceNodeGroupMinSize: with --enforce-node-group-min-size a group
// below its min size is raised to it without any pending pod; without the
// flag it is left alone.
func TestEnforceNodeGroupMinSize(t *testing.T) {
	e := framework.New(t)
	kept, raised := framework.UniqueName("kept"), framework.UniqueName("raised")
	path := groupsConfig(e, raised+":2")
	other := groupsConfig(e, kept+":2")
	p := startAutoscaler(t, "with", scaleUpArgs(e, path, "--enforce-node-group-min-size")...)
	e.Eventually(30*time.Second, "the group raised to its min size", func(context.Context) (bool, error) {
		return nodesPerPool(e)[raised] == 2, nil
	})
	if !p.log.Contains("Raised a node group to its min size") {
		t.Error("the raise is not logged")
	}
	if code := p.terminate(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	q := startAutoscaler(t, "without", append(scaleUpArgs(e, other), "--leader-elect=false")...)
	time.Sleep(4 * time.Second)
	if got := nodesPerPool(e)[kept]; got != 0 || q.log.Contains("Raised a node group") {
		t.Errorf("without the flag the group got %d nodes", got)
	}
}
