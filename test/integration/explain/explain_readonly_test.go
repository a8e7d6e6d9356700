package explain

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestExplainCommandAttemptsNoWrite: `cluster-autoscaler explain node` on
// an empty node whose unneeded time is over (removable at once) answers,
// and its stderr has no line of a write the read-only client or provider
// refused: the run sends no event, writes no DeletionCandidate or
// ToBeDeleted taint, starts no removal and does not save the kwok
// provider's state. The node is left as it was.
func TestExplainCommandAttemptsNoWrite(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("idle")
	node := group + "-n"
	path := itest.GroupsConfig(e, group)
	itest.GroupNode(e, group, node, nil)
	e.Eventually(30*time.Second, node+" ready", func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == apiv1.NodeReady && c.Status == apiv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--scale-down-unneeded-time=0s", "--scale-down-delay-after-add=0s", "--v=2"}
	for _, output := range []string{"text", "json"} {
		out, logs, code := runExplain(t, append([]string{"node", node, "-o", output}, args...)...)
		if code != 0 || !strings.Contains(out, node) {
			t.Errorf("explain node -o %s: exit %d, output:\n%s\nlogs:\n%s", output, code, out, tail(logs, 3000))
		}
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "read-only") {
				t.Errorf("explain node -o %s attempted a write: %s", output, line)
			}
		}
	}
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 0 || n.Spec.Unschedulable {
		t.Errorf("node after explain: taints %v, unschedulable %v; want it untouched", n.Spec.Taints, n.Spec.Unschedulable)
	}
}
