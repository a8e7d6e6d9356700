package explain

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestExplainNodeExpiry: with --max-node-lifetime, `cluster-autoscaler
// explain node` says of each node of a group past its lifetime whether and
// why it would be replaced: the oldest starts (its replacement: one node of
// its own group), one carrying Karpenter's do-not-disrupt is held back by
// that protection; in JSON and in text. The nodes are left as they were.
func TestExplainNodeExpiry(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("aged")
	old, kept := group+"-old", group+"-kept"
	path := itest.GroupsConfig(e, group)
	itest.GroupNode(e, group, old, nil)
	itest.GroupNode(e, group, kept, map[string]string{"karpenter.sh/do-not-disrupt": "true"})
	e.Eventually(30*time.Second, "both nodes Ready", func(ctx context.Context) (bool, error) {
		for _, name := range []string{old, kept} {
			n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeReady(n) {
				return false, err
			}
		}
		return true, nil
	})
	time.Sleep(2 * time.Second) // past the lifetime of 1s
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--max-node-lifetime=1s", "--disruption-settle-time=0s", "--v=2"}

	verdict := func(node string) explain.DisruptionVerdict {
		t.Helper()
		out, logs, code := runExplain(t, append([]string{"node", node, "-o", "json"}, args...)...)
		var got explain.NodeVerdict
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("explain node %s -o json: exit %d, output:\n%s\nlogs:\n%s", node, code, out, tail(logs, 3000))
		}
		for _, d := range got.Disruptions {
			if d.Reason == "expired" {
				return d
			}
		}
		t.Fatalf("explain node %s: no expired verdict in %s", node, out)
		return explain.DisruptionVerdict{}
	}
	if d := verdict(old); d.Decision != explain.DecisionStarts || d.Replacement != "1 of "+group ||
		!strings.Contains(d.Why, "past the maximum lifetime of 1s") {
		t.Errorf("%s: %+v; want it to start, replaced by one node of %s, for its lifetime", old, d, group)
	}
	if d := verdict(kept); d.Decision != explain.DecisionHeld || d.HeldBy != explain.HeldByProtection ||
		!strings.Contains(d.Hold, "karpenter.sh/do-not-disrupt") {
		t.Errorf("%s: %+v; want it held back by karpenter.sh/do-not-disrupt", kept, d)
	}
	out, logs, code := runExplain(t, append([]string{"node", kept}, args...)...)
	for _, want := range []string{"Disruption:", "expired", "held back (protection)", "karpenter.sh/do-not-disrupt"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("explain node %s: exit %d, text lacks %q:\n%s\nlogs:\n%s", kept, code, want, out, tail(logs, 2000))
		}
	}
	for _, name := range []string{old, kept} {
		n, err := e.Client.CoreV1().Nodes().Get(e.Context(), name, metav1.GetOptions{})
		if err != nil || len(n.Spec.Taints) != 0 || n.Spec.Unschedulable {
			t.Errorf("node %s after explain: %v; want it untouched", name, err)
		}
	}
}

func nodeReady(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}
