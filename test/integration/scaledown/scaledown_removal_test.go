package scaledown

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

const toBeDeleted = "ToBeDeletedByClusterAutoscaler"

// nodeTainted reports whether the node exists and carries the taint key.
func nodeTainted(ctx context.Context, e *framework.Env, name, key string) (exists, tainted bool, err error) {
	n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, false, client404(err)
	}
	return true, itest.HasTaintKey(n, key), nil
}

// nodeEvent reports whether an event of reason was recorded on the node.
func nodeEvent(ctx context.Context, e *framework.Env, node, reason string) (bool, error) {
	events, err := e.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		return false, err
	}
	for _, ev := range events.Items {
		if ev.Reason == reason {
			return true, nil
		}
	}
	return false, nil
}

// TestPodBoundAfterTaintCancelsNodeDeletion: an empty node is tainted
// ToBeDeleted; during --node-delete-delay-after-taint a pod is bound to it
// (the informer-based plan did not see it). The autoscaler re-checks the
// node's pods against the API server before deleting, cancels the
// deletion and removes the taint; the node stays.
func TestPodBoundAfterTaintCancelsNodeDeletion(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("recheck")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	node := group + "-n"
	itest.GroupNode(e, group, node, nil)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--node-delete-delay-after-taint=20s")...)
	e.Eventually(60*time.Second, "the empty node tainted ToBeDeleted", func(ctx context.Context) (bool, error) {
		_, tainted, err := nodeTainted(ctx, e, node, toBeDeleted)
		return tainted, err
	})
	// Bound directly, as a racing bind or a scheduler that tolerates the
	// taint would.
	late := framework.MakePod(e.Namespace, "late").Req("100m", "100Mi").Obj()
	late.Spec.NodeName = node
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the deletion cancelled and the taint removed", func(ctx context.Context) (bool, error) {
		exists, tainted, err := nodeTainted(ctx, e, node, toBeDeleted)
		return exists && !tainted && p.Log.Contains("Scale-down of a node cancelled"), err
	})
	e.Eventually(30*time.Second, "a ScaleDownCancelled event on the node", func(ctx context.Context) (bool, error) {
		return nodeEvent(ctx, e, node, "ScaleDownCancelled")
	})
	time.Sleep(3 * time.Second) // more loops: the node is needed by its pod now
	if exists, _, err := nodeTainted(e.Context(), e, node, toBeDeleted); err != nil || !exists {
		t.Errorf("the node was deleted with a pod on it (err %v)", err)
	}
	if p.Log.Contains("Scaled down an empty node") {
		t.Error("an empty-node deletion was logged")
	}
}

// TestDelayDeletionAnnotationHoldsNodeDeletion: an empty node carrying a
// delay-deletion.cluster-autoscaler.kubernetes.io/ annotation is tainted but
// not deleted while the annotation is there; removing it lets the deletion
// go on.
func TestDelayDeletionAnnotationHoldsNodeDeletion(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("hold")
	path := itest.GroupsConfig(e, group)
	node := group + "-n"
	const key = "delay-deletion.cluster-autoscaler.kubernetes.io/backup"
	itest.GroupNode(e, group, node, map[string]string{key: "running"})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--node-delete-delay-after-taint=1s",
		"--node-deletion-delay-timeout=10m")...)
	e.Eventually(60*time.Second, "the node tainted ToBeDeleted", func(ctx context.Context) (bool, error) {
		_, tainted, err := nodeTainted(ctx, e, node, toBeDeleted)
		return tainted, err
	})
	e.Eventually(30*time.Second, "the deletion held by the annotation", func(context.Context) (bool, error) {
		return p.Log.Contains("Deletion held by delay-deletion annotations"), nil
	})
	time.Sleep(5 * time.Second)
	if exists, _, err := nodeTainted(e.Context(), e, node, toBeDeleted); err != nil || !exists {
		t.Fatalf("the node was deleted while its delay-deletion annotation was there (err %v)", err)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + key + `":null}}}`)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the node deleted once the annotation is gone", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e, group)) == 0, nil
	})
}

// TestMinSizeKeptWithRemovalsInFlight: a group of min size 2 has three
// nodes: a runs one small pod, b and c are empty and carry a delay-deletion
// annotation. Empty nodes are simulated first (as upstream), so one of b and
// c is chosen, and the annotation holds its removal in flight for several
// loops. Meanwhile the other empty node is still unneeded: the removal in
// flight must count, so it does not go, no deletion is refused by the
// provider's min size, and the group ends with two nodes.
func TestMinSizeKeptWithRemovalsInFlight(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("minfl")
	path := itest.GroupsConfig(e, group+":2")
	itest.DumpPods(e)
	itest.GroupNode(e, group, group+"-a", nil)
	itest.ReplicaSet(e, "web", group, 1, "500m", false)
	e.Eventually(30*time.Second, "the web pod Running on a", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 1 && nodes[group+"-a"] == 1, err
	})
	const key = "delay-deletion.cluster-autoscaler.kubernetes.io/hold"
	itest.GroupNode(e, group, group+"-b", map[string]string{key: "test"})
	itest.GroupNode(e, group, group+"-c", map[string]string{key: "test"})
	time.Sleep(2 * time.Second) // b and c Ready

	// The group's size is watched throughout.
	var mu sync.Mutex
	fewest := 3
	ctx, stop := context.WithCancel(e.Context())
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		for ctx.Err() == nil {
			if list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + group}); err == nil {
				mu.Lock()
				fewest = min(fewest, len(list.Items))
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() { stop(); watching.Wait() }()

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--node-delete-delay-after-taint=1s",
		"--node-deletion-delay-timeout=10m")...)
	var held, other string
	e.Eventually(60*time.Second, "b or c tainted ToBeDeleted and held", func(ctx context.Context) (bool, error) {
		for _, n := range []string{group + "-b", group + "-c"} {
			if _, tainted, err := nodeTainted(ctx, e, n, toBeDeleted); err != nil || tainted {
				held = n
				return tainted, err
			}
		}
		return false, nil
	})
	other = group + "-b"
	if held == other {
		other = group + "-c"
	}
	e.Eventually(30*time.Second, "the deletion held by the annotation", func(context.Context) (bool, error) {
		return p.Log.Contains("Deletion held by delay-deletion annotations"), nil
	})
	time.Sleep(6 * time.Second) // several loops with the removal in flight
	if _, tainted, err := nodeTainted(e.Context(), e, other, toBeDeleted); err != nil || tainted {
		t.Errorf("%s tainted for deletion while %s's removal was in flight (err %v)", other, held, err)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + key + `":null}}}`)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Context(), held, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the held node removed", func(context.Context) (bool, error) {
		return !slices.Contains(itest.NodeNames(e, group), held), nil
	})
	time.Sleep(5 * time.Second) // more loops past the unneeded time
	if got := itest.NodeNames(e, group); len(got) != 2 || slices.Contains(got, held) {
		t.Errorf("nodes %v, want two (min size 2, %s removed)", got, held)
	}
	mu.Lock()
	defer mu.Unlock()
	if fewest < 2 {
		t.Errorf("the group went down to %d nodes, below its min size 2", fewest)
	}
	if p.Log.Contains("Scale-down of a node failed") || strings.Count(p.Log.String(), "Scaled down") != 1 {
		t.Error("another removal was started while one was in flight (a deletion failed, or another node went)")
	}
	for _, n := range []string{group + "-a", group + "-b", group + "-c"} {
		if failed, err := nodeEvent(e.Context(), e, n, "ScaleDownFailed"); err != nil || failed {
			t.Errorf("ScaleDownFailed on %s (err %v)", n, err)
		}
	}
}

// client404 turns a NotFound into no error (the caller sees exists=false).
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// TestZeroOrMaxGroupScalesDownWhole: a kwok group with zeroOrMaxNodeScaling
// has two nodes, one running a pod that cannot move. The empty one is kept
// (AtomicScaleDownFailed in the status ConfigMap): the group never loses a
// node alone. Once the pod is gone, both nodes go together.
func TestZeroOrMaxGroupScalesDownWhole(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("zom")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: 4
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  options: {zeroOrMaxNodeScaling: true}
`, group, framework.TestNamespaceLabel, e.Namespace))
	itest.DumpPods(e)
	itest.GroupNode(e, group, group+"-a", nil)
	rs := itest.ReplicaSet(e, "keep", group, 1, "3", false) // 3 of 4 CPU: needed where it runs
	e.Eventually(30*time.Second, "the keep pod Running", func(ctx context.Context) (bool, error) {
		running, _, err := itest.PodsOf(ctx, e, "keep")
		return err == nil && running == 1, err
	})
	itest.GroupNode(e, group, group+"-b", nil)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path)...)
	e.Eventually(60*time.Second, "b kept as AtomicScaleDownFailed", func(ctx context.Context) (bool, error) {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
		if err != nil {
			return false, client404(err)
		}
		var kept []clusterstate.UnremovableNode
		if err := yaml.Unmarshal([]byte(cm.Data[clusterstate.UnremovableDataKey]), &kept); err != nil {
			return false, err
		}
		for _, u := range kept {
			if u.Name == group+"-b" && u.Reason == "AtomicScaleDownFailed" {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(3 * time.Second) // more loops past the unneeded time
	if got := itest.NodeNames(e, group); len(got) != 2 {
		t.Fatalf("nodes %v: the zeroOrMaxNodeScaling group lost a node alone", got)
	}
	if _, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Patch(e.Context(), rs.Name, types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "both nodes removed", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e, group)) == 0, nil
	})
	if n := strings.Count(p.Log.String(), `"Scaling down an empty node"`); n != 2 ||
		strings.Count(p.Log.String(), `atomic=true`) < 2 {
		t.Errorf("%d empty-node removals started, want a and b in one atomic job", n)
	}
}

// TestSIGTERMStopsADrain: a drain waits for a pod held by a finalizer; on
// SIGTERM the autoscaler stops it at once and exits 0, leaving the node's
// ToBeDeleted taint, and the next run's start-up clean-up removes it.
func TestSIGTERMStopsADrain(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("term")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	itest.GroupNode(e, group, group+"-a", nil)
	itest.ReplicaSet(e, "web", group, 1, "500m", false)
	e.Eventually(30*time.Second, "the web pod Running on a", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 1 && nodes[group+"-a"] == 1, err
	})
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v", err)
	}
	held := pods.Items[0].Name
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Patch(e.Context(), held, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["test.autoscaler/hold"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.Client.CoreV1().Pods(e.Namespace).Patch(context.Background(), held, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	// Somewhere to move it, kept by its annotation.
	itest.GroupNode(e, group, group+"-b", map[string]string{"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"})
	time.Sleep(2 * time.Second)
	args := itest.ScaleDownArgs(e, path, "--max-graceful-termination-sec=120", "--leader-elect=false")
	first := itest.StartAutoscaler(t, "first", args...)
	e.Eventually(60*time.Second, "a's pod evicted", func(ctx context.Context) (bool, error) {
		pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, held, metav1.GetOptions{})
		return err == nil && pod.DeletionTimestamp != nil, err
	})
	time.Sleep(time.Second) // the drain waits for the pod to go
	start := time.Now()
	if code := first.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !first.Log.Written("Scale-down interrupted") {
		t.Error("the interrupted drain is not logged")
	}
	if exists, tainted, err := nodeTainted(e.Context(), e, group+"-a", toBeDeleted); err != nil || !exists || !tainted {
		t.Fatalf("node a: exists %v, tainted %v (err %v); want it kept with its taint", exists, tainted, err)
	}
	second := itest.StartAutoscaler(t, "second", append(args, "--scale-down-enabled=false")...)
	e.Eventually(30*time.Second, "the taint removed at start-up", func(ctx context.Context) (bool, error) {
		_, tainted, err := nodeTainted(ctx, e, group+"-a", toBeDeleted)
		return !tainted && second.Log.Contains("Removed a deletion taint left by a previous run"), err
	})
}
