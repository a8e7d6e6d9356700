package scaleup

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestScaleUpNeedsTwoGroups: the preferred group's max size cannot hold all
// the pods, so one loop scales it to its max and puts the rest on a second
// group.
func TestScaleUpNeedsTwoGroups(t *testing.T) {
	e := framework.New(t)
	first, second := framework.UniqueName("first"), framework.UniqueName("second")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 2
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, shape: standard}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 3s}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, shape: standard}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 3s}
`, first, second, framework.TestNamespaceLabel, e.Namespace))
	priorities := fmt.Sprintf("20:\n  - ^%s$\n10:\n  - .*\n", first)
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), itest.PriorityConfigMap(e, priorities),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 16, "1", map[string]string{"shape": "standard"}) // four 4-CPU nodes
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=priority")...)
	e.Eventually(90*time.Second, "all 16 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 16)
	})
	if got := itest.NodesPerPool(e); got[first] != 2 || got[second] != 2 {
		t.Errorf("nodes per group = %v, want %s:2 (its max) and %s:2", got, first, second)
	}
	if !p.Log.Written("increases=2 nodesAdded=4") {
		t.Error("the two increases were not made in one loop")
	}
}

// TestNoDoubleScaleUpWhileNodesRegister: instances take 8 s to register
// while the loop runs every second; the loops in between see them as
// upcoming capacity and add nothing.
func TestNoDoubleScaleUpWhileNodesRegister(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("slow")
	path := itest.OneGroupConfig(e, group, 10, "registrationDelay: 8s")
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 6, "1", map[string]string{"pool": group}) // two nodes
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	e.Eventually(90*time.Second, "all 6 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 6)
	})
	time.Sleep(3 * time.Second)
	if got := itest.NodesPerPool(e)[group]; got != 2 {
		t.Errorf("%d nodes, want 2", got)
	}
	if n := strings.Count(p.Log.String(), `"Scaled up node group"`); n != 1 {
		t.Errorf("%d scale-ups logged, want 1", n)
	}
	// The waiting loops saw the pods fit upcoming nodes.
	// (Other tests' leftover pending pods may be counted too.)
	seen := false
	for _, m := range regexp.MustCompile(`fitExisting=(\d+) increases=0`).FindAllStringSubmatch(p.Log.String(), -1) {
		if n, _ := strconv.Atoi(m[1]); n >= 6 {
			seen = true
		}
	}
	if !seen {
		t.Error("no loop saw the pods fit the upcoming nodes")
	}
}

// TestStatusConfigMapAndHealthGate: an unready node beyond the tolerated
// count stops scaling (cluster_safe_to_autoscale 0, status Unhealthy); once
// it is gone the pending pods get their node, the status says so, and a
// clean exit deletes the status ConfigMap.
func TestStatusConfigMapAndHealthGate(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("gated")
	path := itest.OneGroupConfig(e, group, 10, "registrationDelay: 1s")
	// A node nobody runs a kubelet for: never Ready.
	broken := framework.MakeNode(framework.UniqueName("broken")).Obj()
	delete(broken.Annotations, "kwok.x-k8s.io/node")
	broken = e.CreateNode(broken)
	// A Ready node whose GPU (the kwok provider's GPU label) is not
	// allocatable: resourceUnready, as upstream counts it.
	noGPU := e.CreateNode(framework.MakeNode(framework.UniqueName("nogpu")).Label("kwok.x-k8s.io/gpu", "nvidia-tesla-t4").Obj())
	time.Sleep(2500 * time.Millisecond) // older than --max-node-startup-time: unready, not starting
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 2, "1", map[string]string{"pool": group})

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--ok-total-unready-count=0",
		"--max-total-unready-percentage=0", "--max-node-startup-time=2s")...)
	status := func(ctx context.Context) (*clusterstate.Status, string, error) {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
		if err != nil {
			return nil, "", err
		}
		st := &clusterstate.Status{}
		if err := yaml.Unmarshal([]byte(cm.Data["status"]), st); err != nil {
			return nil, "", err
		}
		return st, cm.Annotations[clusterstate.LastUpdatedAnnotation], nil
	}
	e.Eventually(30*time.Second, "status Unhealthy", func(ctx context.Context) (bool, error) {
		st, _, err := status(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && st.ClusterWide.Health.Status == clusterstate.HealthUnhealthy, err
	})
	e.Eventually(30*time.Second, "unready 2, resourceUnready 1", func(ctx context.Context) (bool, error) {
		st, _, err := status(ctx)
		if err != nil {
			return false, err
		}
		u := st.ClusterWide.Health.NodeCounts.Registered.Unready
		return u.Total >= 2 && u.ResourceUnready == 1, nil
	})
	time.Sleep(3 * time.Second) // several loops
	// Scale-down never planned (the loops stop at the health gate): its
	// probe time is null, as upstream's.
	if st, _, err := status(e.Context()); err != nil {
		t.Error(err)
	} else if !st.ClusterWide.ScaleDown.LastProbeTime.IsZero() {
		t.Errorf("scaleDown probed at %v while no loop reached scale-down, want null", st.ClusterWide.ScaleDown.LastProbeTime)
	}
	if got := itest.NodesPerPool(e)[group]; got != 0 {
		t.Fatalf("%d nodes added while the cluster was unhealthy", got)
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	if !strings.Contains(body, "cluster_autoscaler_cluster_safe_to_autoscale 0") {
		t.Error("/metrics does not say the cluster is unsafe to autoscale")
	}
	if !p.Log.Written("Cluster is unhealthy") {
		t.Error("the health gate is not logged")
	}

	for _, n := range []string{broken.Name, noGPU.Name} {
		if err := e.Client.CoreV1().Nodes().Delete(e.Context(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(60*time.Second, "both pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	e.Eventually(20*time.Second, "status Healthy with the group", func(ctx context.Context) (bool, error) {
		st, updated, err := status(ctx)
		if err != nil {
			return false, err
		}
		if st.AutoscalerStatus != clusterstate.AutoscalerRunning || st.Time != updated ||
			st.ClusterWide.Health.Status != clusterstate.HealthHealthy {
			return false, nil
		}
		for _, g := range st.NodeGroups {
			if g.Name == group {
				return g.Health.CloudProviderTarget == 1 && g.Health.NodeCounts.Registered.Ready == 1 &&
					g.ScaleUp.Status == clusterstate.ScaleUpNoActivity && !st.ClusterWide.ScaleDown.LastProbeTime.IsZero(), nil
			}
		}
		return false, nil
	})
	_, body, _ = p.Get(e.Context(), "/metrics")
	if !strings.Contains(body, "cluster_autoscaler_cluster_safe_to_autoscale 1") {
		t.Error("/metrics does not say the cluster is safe to autoscale again")
	}
	if code := p.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if _, _, err := status(e.Context()); !apierrors.IsNotFound(err) {
		t.Errorf("status ConfigMap after a clean exit: %v, want deleted", err)
	}
}
