package itest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// ScaleUpConfig writes a kwok provider config with a small (4 CPU) and a
// large (16 CPU, label pool=large-<suffix>) group and returns its path and
// the group names.
func ScaleUpConfig(e *framework.Env) (path, small, large string) {
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
	return WriteKwokConfig(e, cfg), small, large
}

// WriteKwokConfig writes a kwok provider config for --cloud-config and returns its path.
func WriteKwokConfig(e *framework.Env, cfg string) string {
	e.T.Helper()
	path := filepath.Join(e.T.TempDir(), "kwok.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.T.Fatal(err)
	}
	return path
}

// ClusterCapacity counts the nodes already in the cluster and their cores.
func ClusterCapacity(e *framework.Env) (nodes int, cores int64) {
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

// ScaleUpArgs are the autoscaler's arguments for a config-only kwok provider.
func ScaleUpArgs(e *framework.Env, configPath string, extra ...string) []string {
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + configPath, "--scan-interval=1s", "--v=4"}
	return append(args, extra...)
}

// CreatePods creates n pods <prefix>-<i> requesting cpu and 1Gi, with nodeSelector.
func CreatePods(e *framework.Env, prefix string, n int, cpu string, nodeSelector map[string]string) {
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

// NodesPerPool counts the nodes of each pool label value.
func NodesPerPool(e *framework.Env) map[string]int {
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

// DumpPods logs every pod of the test with its node, phase and scheduling
// message, and every node with its allocatable cpu, when the test fails.
func DumpPods(e *framework.Env) {
	e.T.Cleanup(func() {
		if !e.T.Failed() {
			return
		}
		ctx := context.Background()
		pods, _ := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
		unjudged := false
		for _, p := range pods.Items {
			msg := "(no PodScheduled condition: the scheduler has not judged it)"
			judged := false
			for _, c := range p.Status.Conditions {
				if c.Type == apiv1.PodScheduled {
					msg, judged = fmt.Sprintf("PodScheduled=%s %s: %s", c.Status, c.Reason, c.Message), true
				}
			}
			unjudged = unjudged || (!judged && p.Spec.NodeName == "" && p.DeletionTimestamp == nil)
			e.T.Logf("pod %s node=%q phase=%s %s", p.Name, p.Spec.NodeName, p.Status.Phase, msg)
		}
		if tail := framework.ComponentLogTail("kube-scheduler", 3000); unjudged && tail != "" {
			e.T.Logf("a pending pod was never judged; the end of kube-scheduler's log:\n%s", tail)
		}
		nodes, _ := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			e.T.Logf("node %s pool=%s cpu=%s taints=%v", n.Name, n.Labels["pool"], n.Status.Allocatable.Cpu(), n.Spec.Taints)
		}
	})
}

// PodEvent waits for an event of reason on a pod of the test whose message contains text.
func PodEvent(e *framework.Env, reason, text string) {
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

// AllRunning reports whether exactly want of the test's pods are Running.
func AllRunning(ctx context.Context, e *framework.Env, want int) (bool, error) {
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
