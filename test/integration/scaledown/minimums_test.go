package scaledown

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestScaleDownKeepsTheCoresMinimum: three empty 4-core nodes become
// unneeded in the same loop, and the --cores-total minimum leaves room for
// one of them to go: the removals of the loop count together, so one node
// goes and the two others stay, kept as MinimalResourceLimitExceeded with
// the minimum named in the status ConfigMap.
func TestScaleDownKeepsTheCoresMinimum(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("floor")
	path := itest.GroupsConfig(e, group)
	for _, s := range []string{"a", "b", "c"} {
		itest.GroupNode(e, group, group+"-"+s, nil)
	}
	_, cores := itest.ClusterCapacity(e)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path,
		fmt.Sprintf("--cores-total=%d:%d", cores-7, cores+100), "--unremovable-node-recheck-timeout=0s")...)
	e.Eventually(60*time.Second, "one node removed", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e, group)) == 2, nil
	})
	time.Sleep(4 * time.Second) // more loops past the unneeded time
	left := itest.NodeNames(e, group)
	if len(left) != 2 {
		t.Fatalf("nodes left %v, want 2 (the minimum leaves room for one 4-core node to go)", left)
	}
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(e.Context(), "cluster-autoscaler-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []clusterstate.UnremovableNode
	if err := yaml.Unmarshal([]byte(cm.Data[clusterstate.UnremovableDataKey]), &kept); err != nil {
		t.Fatal(err)
	}
	got := map[string]clusterstate.UnremovableNode{}
	for _, u := range kept {
		got[u.Name] = u
	}
	for _, n := range left {
		u := got[n]
		if u.Reason != "MinimalResourceLimitExceeded" || u.Detail != "would go below the minimum of cluster-wide: cpu" {
			t.Errorf("status says %s is kept for %q (%q), want MinimalResourceLimitExceeded for the cluster-wide cpu minimum",
				n, u.Reason, u.Detail)
		}
	}
	if !p.Log.Written("it would violate minimum limits") {
		t.Error("the kept nodes are not logged")
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	skipped := regexp.MustCompile(`cluster_autoscaler_skipped_scale_events_count\{direction="down",reason="CpuResourceLimit"\} [1-9]`)
	if !skipped.MatchString(body) {
		t.Error("/metrics counts no scale-down skipped for the cores minimum")
	}
}
