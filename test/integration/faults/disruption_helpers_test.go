package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// The disruption fault tests drive the engine's voluntary reasons (drift,
// expiry) in the autoscaler binary on one kwok group, with scale-down off so
// that only the engine removes nodes. A node is made drifted by giving it a
// template hash of the current version that is not its group's (as a Node
// made before the template changed carries).

// Log lines of the engine and of the kwok provider the tests count.
const (
	logAskedReplacement = "Asked for the replacement of nodes being disrupted"
	logDeletedDisrupted = "Deleted a node being disrupted"
	logKwokIncreased    = "kwok node group increased"
)

// disruptionArgs are the autoscaler's flags for these tests: the engine on
// for the given reasons (extra), no settle time, scale-down off.
func disruptionArgs(e *framework.Env, path string, extra ...string) []string {
	return itest.ScaleUpArgs(e, path, append([]string{"--scale-down-enabled=false", "--disruption-settle-time=0",
		"--max-pod-eviction-time=2m"}, extra...)...)
}

// webOnOneNode creates the Deployment web (2 pods of 1 CPU on pool, which
// the autoscaler scales up for) and waits until both run on one node,
// which it returns.
func webOnOneNode(e *framework.Env, pool string) string {
	e.T.Helper()
	itest.Deployment(e, "web", 2, map[string]string{"pool": pool})
	var node string
	e.Eventually(90*time.Second, "both web pods Running on one node", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		if err != nil || running != 2 || len(nodes) != 1 {
			return false, err
		}
		for n := range nodes {
			node = n
		}
		return true, nil
	})
	return node
}

// markDrifted gives node a template hash of the provider's current version
// that no template has: its group reports it drifted.
func markDrifted(e *framework.Env, node string) {
	e.T.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"v1-00000000000000000000000000000000"}}}`, kwok.TemplateHashAnnotation)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// poolSeen polls the Nodes of pool every 200 ms (a failed list is skipped:
// it survives kube-apiserver restarts, which end watches) and returns every
// name seen so far.
func poolSeen(e *framework.Env, pool string) func() []string {
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
			cancel()
			if err == nil {
				mu.Lock()
				for _, n := range list.Items {
					seen[n.Name] = true
				}
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	e.T.Cleanup(func() { close(done); <-stopped })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := make([]string, 0, len(seen))
		for n := range seen {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}
}

// enginePlans reads the plans in flight from the engine's state ConfigMap
// (none when it does not exist).
func enginePlans(ctx context.Context, e *framework.Env) (map[string]json.RawMessage, error) {
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, disruption.StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st struct {
		Heals map[string]json.RawMessage `json:"heals"`
	}
	if data := cm.Data["state"]; data != "" {
		if err := json.Unmarshal([]byte(data), &st); err != nil {
			return nil, err
		}
	}
	return st.Heals, nil
}

// describePlans makes a timed-out wait print the engine's state ConfigMap:
// which plans are in flight, in which phase, since when, with their last
// error.
func describePlans(e *framework.Env) {
	e.DescribeOnTimeout(func(ctx context.Context) string {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, disruption.StateConfigMap, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("the engine's state ConfigMap: %v", err)
		}
		return fmt.Sprintf("the engine's state ConfigMap (resourceVersion %s): %s", cm.ResourceVersion, cm.Data["state"])
	})
}

// logCount counts the lines of the processes' logs that contain every one
// of parts.
func logCount(ps []*itest.AutoscalerProcess, parts ...string) int {
	n := 0
	for _, p := range ps {
		n += countMatches(p.Log.String(), parts...)
	}
	return n
}

// replacement is what a finished replacement left.
type replacement struct {
	newNode  string
	seen     []string // every Node of the pool ever seen
	took     time.Duration
	askedFor int // replacements asked for, in the logs
	deletes  int // nodes deleted by the engine, in the logs
	oldDels  int // of which the old node
	increase int // increases of the pool in the kwok provider's logs
}

func (r replacement) String() string {
	return fmt.Sprintf("new node %s; nodes seen %v; old node gone %v after the fault; replacements asked %d; deletions %d (old %d); kwok increases %d",
		r.newNode, r.seen, r.took.Round(100*time.Millisecond), r.askedFor, r.deletes, r.oldDels, r.increase)
}

// waitReplaced waits until old is gone and both web pods are Running on
// one other node of pool, Ready and schedulable, with no plan left in
// flight; it reads the logs and the Nodes seen at that moment.
func waitReplaced(t *testing.T, e *framework.Env, pool, old string, since time.Time, seen func() []string,
	ps ...*itest.AutoscalerProcess) replacement {
	t.Helper()
	var r replacement
	e.Eventually(150*time.Second, "node "+old+" replaced: gone, both web pods Running on its replacement", func(ctx context.Context) (bool, error) {
		if _, err := e.Client.CoreV1().Nodes().Get(ctx, old, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		if err != nil || running != 2 || len(nodes) != 1 {
			return false, nil
		}
		for n := range nodes {
			r.newNode = n
		}
		plans, err := enginePlans(ctx, e)
		return err == nil && len(plans) == 0, nil
	})
	r.took = time.Since(since)
	r.seen = seen()
	r.askedFor = logCount(ps, logAskedReplacement)
	r.deletes = logCount(ps, logDeletedDisrupted)
	r.oldDels = logCount(ps, logDeletedDisrupted, `deleted="`+old+`"`)
	r.increase = logCount(ps, logKwokIncreased, `nodeGroup="`+pool+`"`)
	return r
}

// checkReplacedOnce checks what a replacement of old must leave: exactly
// one new node (two Nodes ever seen in the pool), one replacement asked
// for, the old node deleted once and nothing else, the new node
// schedulable and untainted, the PDB honoured throughout.
func checkReplacedOnce(t *testing.T, e *framework.Env, r replacement, old string, minReady int32) {
	t.Helper()
	if len(r.seen) != 2 || !slices.Contains(r.seen, old) || !slices.Contains(r.seen, r.newNode) {
		t.Errorf("nodes seen in the pool %v, want %s and exactly one replacement (%s)", r.seen, old, r.newNode)
	}
	if r.askedFor != 1 {
		t.Errorf("%d replacements asked for, want 1", r.askedFor)
	}
	if r.increase != 2 {
		t.Errorf("%d increases of the pool, want 2 (the first node, its replacement)", r.increase)
	}
	if r.deletes != 1 || r.oldDels != 1 {
		t.Errorf("%d nodes deleted by the engine (%d of them %s), want %s once and nothing else", r.deletes, r.oldDels, old, old)
	}
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), r.newNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || itest.HasTaintKey(n, disruption.Taint) {
		t.Errorf("the replacement %s is left cordoned (%v) or tainted (%v)", n.Name, n.Spec.Unschedulable, n.Spec.Taints)
	}
	if minReady < 1 {
		t.Errorf("Ready web pods fell to %d: the PDB (minAvailable 1) was not honoured, a pod was lost", minReady)
	}
}

// checkGivenBack checks that node carries nothing of a disruption: not
// cordoned, no disruption taint, no scale-down-disabled annotation.
func checkGivenBack(ctx context.Context, e *framework.Env, node string) error {
	n, err := e.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	_, annotated := n.Annotations["cluster-autoscaler.kubernetes.io/scale-down-disabled"]
	if n.Spec.Unschedulable || itest.HasTaintKey(n, disruption.Taint) || annotated {
		return fmt.Errorf("node %s unschedulable=%v taints=%v scale-down-disabled annotation=%v", node, n.Spec.Unschedulable,
			n.Spec.Taints, annotated)
	}
	return nil
}
