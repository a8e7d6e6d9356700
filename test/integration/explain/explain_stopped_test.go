package explain

import (
	"strings"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestExplainzPodOfAnUnhealthyCluster: a pending pod in a cluster the
// health gate stops at (an unready node beyond --ok-total-unready-count=0)
// is explained by /explainz with why there is no scale-up and the counts,
// where it used to get a 404.
func TestExplainzPodOfAnUnhealthyCluster(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("gated")
	path := itest.OneGroupConfig(e, group, 10, "registrationDelay: 1s")
	// A node nobody runs a kubelet for: never Ready.
	broken := framework.MakeNode(framework.UniqueName("broken")).Obj()
	delete(broken.Annotations, "kwok.x-k8s.io/node")
	e.CreateNode(broken)
	time.Sleep(2500 * time.Millisecond) // older than --max-node-startup-time: unready, not starting
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 1, "1", map[string]string{"pool": group})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--ok-total-unready-count=0",
		"--max-total-unready-percentage=0", "--max-node-startup-time=2s")...)
	got := explainPod(e, p, "web-0", "web-0 explained as stopped by the health gate", func(g explainedPod) bool {
		return g.Outcome == explain.OutcomeLoopStopped
	})
	const prefix = "cluster unhealthy ("
	if !strings.HasPrefix(got.Message, prefix) || !strings.Contains(got.Message, " unready and ") ||
		!strings.Contains(got.Message, "--ok-total-unready-count=0, --max-total-unready-percentage=0)") {
		t.Errorf("message %q, want %q with the unready count and the thresholds", got.Message, prefix)
	}
	_, text, err := p.Explainz(e.Context(), "pod="+e.Namespace+"/web-0")
	if err != nil || !strings.Contains(text, "Outcome: no scale-up this loop: cluster unhealthy (") {
		t.Errorf("/explainz text (%v):\n%s", err, text)
	}
	if n := itest.NodesPerPool(e)[group]; n != 0 {
		t.Errorf("%d nodes added while the cluster was unhealthy", n)
	}
}
