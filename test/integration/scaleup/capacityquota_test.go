package scaleup

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// createQuota creates a cluster-scoped CapacityQuota from its spec (YAML as
// JSON-compatible map) and deletes it when the test ends.
func createQuota(e *framework.Env, dyn dynamic.Interface, name string, spec map[string]any) {
	e.T.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capacityquota.GroupVersion.String(), "kind": "CapacityQuota",
		"metadata": map[string]any{"name": name}, "spec": spec}}
	if _, err := dyn.Resource(capacityquota.Resource).Create(e.Context(), obj, metav1.CreateOptions{}); err != nil {
		e.T.Fatalf("creating CapacityQuota %s: %v", name, err)
	}
	e.T.Cleanup(func() {
		_ = dyn.Resource(capacityquota.Resource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// TestCapacityQuotaCapsScaleUp: with --capacity-quotas-enabled a
// CapacityQuota of 8 CPUs over a group's nodes stops its scale-up at two
// 4-CPU nodes, the pods left pending say why, and an invalid quota gets a
// Warning event and is ignored without harm.
func TestCapacityQuotaCapsScaleUp(t *testing.T) {
	e := framework.New(t)
	if err := capacityquota.InstallCRD(e.Context(), e.Config); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	path, small, large := itest.ScaleUpConfig(e)
	itest.DumpPods(e)
	limitName, badName := framework.UniqueName("cpu8"), framework.UniqueName("bad")
	createQuota(e, dyn, limitName, map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"pool": small}},
		"limits":   map[string]any{"resources": map[string]any{"cpu": "8"}}})
	createQuota(e, dyn, badName, map[string]any{
		"selector": map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "Near"}}},
		"limits":   map[string]any{"resources": map[string]any{"nodes": 0}}})
	itest.CreatePods(e, "web", 10, "1", map[string]string{"pool": small}) // 3 nodes without the quota

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--capacity-quotas-enabled=true")...)
	e.Eventually(60*time.Second, "8 pods Running on 2 nodes", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 8)
	})
	itest.PodEvent(e, "NotTriggerScaleUp", "CapacityQuota "+limitName+" reached")
	time.Sleep(3 * time.Second) // several more loops at --scan-interval=1s
	if got := itest.NodesPerPool(e); got[small] != 2 || got[large] != 0 {
		t.Errorf("nodes per group = %v, want %s:2 (the quota) and no %s", got, small, large)
	}
	e.Eventually(20*time.Second, "a Warning event on the invalid quota", func(ctx context.Context) (bool, error) {
		events, err := e.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + badName})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == "InvalidCapacityQuota" && strings.Contains(ev.Message, "spec.selector") {
				return true, nil
			}
		}
		return false, nil
	})
	select {
	case <-p.Done:
		t.Fatal("the autoscaler exited")
	default:
	}

	// status.used: the two 4-CPU nodes of the group.
	e.Eventually(30*time.Second, "status.used.resources.cpu 8 on "+limitName, func(ctx context.Context) (bool, error) {
		q, err := dyn.Resource(capacityquota.Resource).Get(ctx, limitName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cpu, _, _ := unstructured.NestedString(q.Object, "status", "used", "resources", "cpu")
		return cpu == "8", nil
	})

	// Raising the limit lets the rest of the pods run on one more node.
	patch := `{"spec":{"limits":{"resources":{"cpu":"12"}}}}`
	if _, err := dyn.Resource(capacityquota.Resource).Patch(e.Context(), limitName, "application/merge-patch+json",
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "all 10 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 10)
	})
	if got := itest.NodesPerPool(e)[small]; got != 3 {
		t.Errorf("%d nodes in %s after raising the quota, want 3", got, small)
	}
}
