package healing

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"k8s.io/autoscaler/cluster-autoscaler/healing"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// hookServer records the hook calls and answers with the status it is set to.
type hookServer struct {
	*httptest.Server
	mu     sync.Mutex
	calls  []healing.HookRequest
	status atomic.Int32
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{}
	h.status.Store(http.StatusOK)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req healing.HookRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.calls = append(h.calls, req)
		h.mu.Unlock()
		w.WriteHeader(int(h.status.Load()))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) callsFor(node string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.calls {
		if c.Node == node {
			out = append(out, c.Phase)
		}
	}
	return out
}

// healingGroup writes a kwok config with one group of 1-CPU nodes (one
// pod of the tests' Deployment each), up to 4, and returns its name and path.
func healingGroup(e *framework.Env, prefix string) (pool, path string) {
	pool = framework.UniqueName(prefix)
	return pool, itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 4
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "1", memory: 4Gi, pods: "110"}
`, pool, framework.TestNamespaceLabel, e.Namespace))
}

// twoRunningNodes waits for the tests' two-pod Deployment to run and
// returns the two nodes of pool it runs on.
func twoRunningNodes(e *framework.Env, pool string) []apiv1.Node {
	e.T.Helper()
	e.Eventually(90*time.Second, "both pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	nodes, err := poolNodeList(e.Context(), e, pool)
	if err != nil || len(nodes) != 2 {
		e.T.Fatalf("%d nodes of %s (%v), want 2", len(nodes), pool, err)
	}
	return nodes
}

// samplePool hands the nodes of pool to see every 200ms until the returned
// stop is called (stop waits for the sampler to end).
func samplePool(e *framework.Env, pool string, see func([]apiv1.Node)) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if list, err := poolNodeList(context.Background(), e, pool); err == nil {
				see(list)
			}
		}
	}()
	return func() { close(done); <-ended }
}

// smallPool writes a kwok configuration of one node group named after
// prefix, of 4-CPU nodes labelled with the test's namespace and pool, at most
// maxSize of them; it returns the group's (and pool label's) name and the
// configuration's path.
func smallPool(e *framework.Env, prefix string, maxSize int) (pool, path string) {
	pool = framework.UniqueName(prefix)
	path = itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: %[4]d
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, pool, framework.TestNamespaceLabel, e.Namespace, maxSize))
	return pool, path
}

func poolNodeList(ctx context.Context, e *framework.Env, pool string) ([]apiv1.Node, error) {
	list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func annotateHeal(e *framework.Env, node, reason string) {
	e.T.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, healing.Annotation, reason)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// TestNodeHealing, on the real control plane with the kwok provider:
//   - a heal_start hook that fails (policy Fail) leaves the annotated node
//     untouched and reports HealFailed;
//   - once the hook answers 200 (after the cooldown) the node is healed:
//     hooks heal_start then heal_end, the replacement asked for first and
//     Ready before the node is drained (the group's Ready nodes never drop
//     below the two the workload needs), the node deleted by name, the
//     Deployment's pods Running elsewhere;
//   - when both nodes of the group are annotated at once, the breaker
//     heals neither and says why.
func TestNodeHealing(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool, path := healingGroup(e, "heal")
	hooks := newHookServer(t)
	hooksFile := filepath.Join(t.TempDir(), "hooks.yaml")
	if err := os.WriteFile(hooksFile, fmt.Appendf(nil, `hooks:
- name: cmdb
  url: %s/heal
  phases: [heal_start, heal_end]
  timeout: 2s
`, hooks.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	itest.Deployment(e, "web", 2, map[string]string{"pool": pool}) // one 1-CPU pod per 1-CPU node
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--node-healing-enabled",
		"--node-healing-hooks-config="+hooksFile, "--node-healing-cooldown=3s", "--max-pod-eviction-time=20s")...)
	nodes := twoRunningNodes(e, pool)
	sick := nodes[0].Name

	// heal_start fails: nothing is touched.
	hooks.status.Store(http.StatusInternalServerError)
	annotateHeal(e, sick, "disk-failure")
	e.Eventually(30*time.Second, "HealFailed on "+sick, func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e, sick)
		return err == nil && ev["HealFailed"] != "", err
	})
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), sick, metav1.GetOptions{})
	if err != nil || n.Spec.Unschedulable {
		t.Fatalf("node %s after a failed heal_start: %v, unschedulable=%v; want it untouched", sick, err, n != nil && n.Spec.Unschedulable)
	}

	// The hook answers 200: the node is healed after the cooldown.
	hooks.status.Store(http.StatusOK)
	var minReady atomic.Int32
	minReady.Store(100)
	stopSampling := samplePool(e, pool, func(list []apiv1.Node) {
		ready := int32(0)
		for i := range list {
			// A cordoned node still runs its pod until it is drained.
			if nodeIsReady(&list[i]) {
				ready++
			}
		}
		if ready < minReady.Load() {
			minReady.Store(ready)
		}
	})
	e.Eventually(120*time.Second, "node "+sick+" replaced", func(ctx context.Context) (bool, error) {
		list, err := poolNodeList(ctx, e, pool)
		if err != nil {
			return false, err
		}
		for _, n := range list {
			if n.Name == sick {
				return false, nil
			}
		}
		ev, err := itest.NodeEvents(ctx, e, sick)
		return err == nil && ev["HealSucceeded"] != "" && len(list) == 2, err
	})
	stopSampling()
	if got := hooks.callsFor(sick); len(got) < 2 || got[len(got)-2] != healing.PhaseStart || got[len(got)-1] != healing.PhaseEnd {
		t.Errorf("hook calls for %s = %v, want ... heal_start, heal_end", sick, got)
	}
	e.Eventually(60*time.Second, "both pods Running again", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	if m := minReady.Load(); m < 2 {
		t.Errorf("the group had %d Ready nodes during the heal, want never fewer than 2 (replace before remove)", m)
	}
	if !p.Log.Written(`"Deleted a node being healed"`) {
		t.Error("the deletion is not logged")
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	// The failing hook may have been tried more than once (every cooldown)
	// before it was switched to 200.
	if !strings.Contains(body, `cluster_autoscaler_node_heals_total{reason="Replaced",result="succeeded"} 1`) ||
		!regexp.MustCompile(`cluster_autoscaler_node_heals_total\{reason="HookFailed",result="failed"\} [1-9]`).MatchString(body) {
		t.Errorf("/metrics lacks the heal counts")
	}

	// Both nodes at once: an outage, not a node fault.
	nodes, err = poolNodeList(e.Context(), e, pool)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("%d nodes of %s (%v), want 2", len(nodes), pool, err)
	}
	// The autoscaler is stopped while both are annotated: a loop between
	// the two updates would see one sick node of two, which the breaker
	// allows, and heal it.
	p.WhilePaused(func() {
		for _, n := range nodes {
			annotateHeal(e, n.Name, "rack-power")
		}
	})
	e.Eventually(30*time.Second, "HealSkipped on both", func(ctx context.Context) (bool, error) {
		for _, n := range nodes {
			ev, err := itest.NodeEvents(ctx, e, n.Name)
			if err != nil || ev["HealSkipped"] == "" {
				return false, err
			}
		}
		return true, nil
	})
	time.Sleep(3 * time.Second)
	after, err := poolNodeList(e.Context(), e, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 {
		t.Errorf("%d nodes after the breaker tripped, want the same 2", len(after))
	}
	for _, n := range after {
		if n.Spec.Unschedulable {
			t.Errorf("node %s cordoned although the breaker tripped", n.Name)
		}
	}
}

func nodeIsReady(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

// TestNodeHealingReplacesANotReadyNode: a node whose kubelet is gone (kwok
// no longer manages it) and whose Ready condition is False past the
// policy's duration is replaced without any annotation, the hooks called in
// order; its pods, which cannot terminate there, stay until the node's
// instance is deleted (past --max-pod-eviction-time) and the workload runs on
// the other nodes.
func TestNodeHealingReplacesANotReadyNode(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool, path := healingGroup(e, "notready")
	hooks := newHookServer(t)
	hooksFile := cmdbHooksFile(t, hooks.URL)
	itest.Deployment(e, "web", 2, map[string]string{"pool": pool})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--node-healing-enabled", "--node-healing-hooks-config="+hooksFile,
		"--node-healing-policy=Ready=False:3s", "--max-pod-eviction-time=5s", "--max-node-provision-time=20s")...)
	nodes := twoRunningNodes(e, pool)
	sick := nodes[0]
	itest.PartitionNode(e, sick.Name)
	e.Eventually(120*time.Second, "node "+sick.Name+" replaced", func(ctx context.Context) (bool, error) {
		list, err := poolNodeList(ctx, e, pool)
		if err != nil {
			return false, err
		}
		for _, n := range list {
			if n.Name == sick.Name {
				return false, nil
			}
		}
		return len(list) == 2, nil
	})
	// The pod garbage collector removes the old pods some 40-60 s after their Node.
	e.Eventually(150*time.Second, "both pods Running again", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	var ev map[string]string
	e.Eventually(60*time.Second, "HealSucceeded on "+sick.Name, func(ctx context.Context) (bool, error) {
		var err error
		ev, err = itest.NodeEvents(ctx, e, sick.Name)
		return err == nil && ev["HealSucceeded"] != "", err
	})
	if !strings.Contains(ev["HealStarted"], "Ready=False") {
		t.Errorf("HealStarted on %s = %q, want it to name the condition", sick.Name, ev["HealStarted"])
	}
	if got := strings.Join(hooks.callsFor(sick.Name), ","); got != healing.PhaseStart+","+healing.PhaseEnd {
		t.Errorf("hook calls for %s = %q, want heal_start,heal_end", sick.Name, got)
	}
	if !p.Log.Written(`"Healing a node"`) {
		t.Error("the heal is not logged")
	}
}

// TestNodeHealingResumesAfterAKill: a heal held in its drain by a PDB
// survives a SIGKILL of the autoscaler: the next process reads the phase
// from the ConfigMap, does not call heal_start or ask for the replacement
// again, and finishes the heal once the PDB allows it. The heal in flight
// shows in the status ConfigMap's healing key, gone once it ends. The hook
// is HTTPS, verified with the CA bundle of its file.
func TestNodeHealingResumesAfterAKill(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool, path := healingGroup(e, "resume")
	var mu sync.Mutex
	var calls []string
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req healing.HookRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		calls = append(calls, req.Phase+"@"+req.Node)
		mu.Unlock()
	}))
	defer hook.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	hooksFile := filepath.Join(dir, "hooks.yaml")
	if err := os.WriteFile(hooksFile, fmt.Appendf(nil, "hooks:\n- {name: tls, url: %q, phases: [heal_start, heal_end], caFile: %q}\n",
		hook.URL+"/heal", caFile), 0o600); err != nil {
		t.Fatal(err)
	}
	itest.Deployment(e, "web", 2, map[string]string{"pool": pool})
	two := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	args := itest.ScaleUpArgs(e, path, "--node-healing-enabled", "--node-healing-hooks-config="+hooksFile,
		"--max-pod-eviction-time=5m", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=500ms")
	first := itest.StartAutoscaler(t, "first", args...)
	nodes := twoRunningNodes(e, pool)
	sick := nodes[0].Name
	var maxNodes atomic.Int32
	stopSampling := samplePool(e, pool, func(list []apiv1.Node) {
		if int32(len(list)) > maxNodes.Load() {
			maxNodes.Store(int32(len(list)))
		}
	})
	annotateHeal(e, sick, "memory-errors")
	e.Eventually(60*time.Second, "the heal recorded as Draining", func(ctx context.Context) (bool, error) {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, healing.StateConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return strings.Contains(cm.Data["state"], `"phase":"Draining"`) && strings.Contains(cm.Data["state"], `"increased":true`), nil
	})
	e.Eventually(30*time.Second, "the heal in the status ConfigMap", func(ctx context.Context) (bool, error) {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		h := cm.Data[healing.StatusKey]
		return strings.Contains(h, "node: "+sick) && strings.Contains(h, "phase: Draining"), nil
	})
	_ = first.Cmd.Process.Kill()
	<-first.Done
	if err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Delete(e.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := itest.StartAutoscaler(t, "second", args...)
	e.Eventually(120*time.Second, "the heal finished by the second process", func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e, sick)
		return err == nil && ev["HealSucceeded"] != "", err
	})
	stopSampling()
	e.Eventually(60*time.Second, "both pods Running again", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	mu.Lock()
	got := strings.Join(calls, ",")
	mu.Unlock()
	if want := "heal_start@" + sick + ",heal_end@" + sick; got != want {
		t.Errorf("hook calls %q, want %q (heal_start once, before the kill)", got, want)
	}
	if m := maxNodes.Load(); m > 3 {
		t.Errorf("the group reached %d nodes, want at most 3 (one replacement, asked for once)", m)
	}
	if first.Log.Contains(`"Deleted a node being healed"`) || strings.Count(second.Log.String(), `"Deleted a node being healed"`) != 1 {
		t.Error("the node is not deleted exactly once, by the second process")
	}
	if second.Log.Contains(`"Asked for the replacement`) {
		t.Error("the second process asked for the replacement again")
	}
	e.Eventually(30*time.Second, "no heal left in the status ConfigMap", func(ctx context.Context) (bool, error) {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, has := cm.Data[healing.StatusKey]
		return !has, nil
	})
}

// TestNodeHealingKeepsTheOperatorsChanges: a heal held in its drain by a PDB
// fails past --max-pod-eviction-time and gives the node back; the
// scale-down-disabled annotation the operator changed while the heal ran
// stays as the operator left it, and heal_end follows heal_start once, with
// outcome restored.
func TestNodeHealingKeepsTheOperatorsChanges(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool, path := healingGroup(e, "keep")
	hooks := newHookServer(t)
	hooksFile := cmdbHooksFile(t, hooks.URL)
	itest.Deployment(e, "web", 2, map[string]string{"pool": pool})
	two := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--node-healing-enabled", "--node-healing-hooks-config="+hooksFile,
		"--node-healing-cooldown=1h", "--max-pod-eviction-time=10s")...)
	sick := twoRunningNodes(e, pool)[0].Name
	annotateHeal(e, sick, "ecc-errors")
	e.Eventually(60*time.Second, "node "+sick+" cordoned by the heal", func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, sick, metav1.GetOptions{})
		return err == nil && n.Spec.Unschedulable && n.Annotations[scaledown.ScaleDownDisabledAnnotation] == "true", err
	})
	// The operator: keep scale-down off this node, its own way.
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"false"}}}`, scaledown.ScaleDownDisabledAnnotation)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Context(), sick, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "HealFailed on "+sick, func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e, sick)
		return err == nil && strings.Contains(ev["HealFailed"], "EvictionTimeout"), err
	})
	e.Eventually(30*time.Second, "heal_end for "+sick, func(context.Context) (bool, error) {
		return len(hooks.callsFor(sick)) >= 2, nil
	})
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), sick, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := n.Annotations[scaledown.ScaleDownDisabledAnnotation]; !ok || got != "false" {
		t.Errorf("scale-down-disabled %q (present %v) after the heal, want the operator's \"false\"", got, ok)
	}
	if n.Spec.Unschedulable {
		t.Error("the node stays cordoned after its heal failed")
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == healing.Taint {
			t.Errorf("the node keeps the healing taint: %+v", taint)
		}
	}
	hooks.mu.Lock()
	var got []string
	for _, c := range hooks.calls {
		if c.Node == sick {
			got = append(got, c.Phase+":"+c.Outcome)
		}
	}
	hooks.mu.Unlock()
	if want := healing.PhaseStart + ":," + healing.PhaseEnd + ":" + healing.OutcomeRestored; strings.Join(got, ",") != want {
		t.Errorf("hook calls for %s = %v, want %s", sick, got, want)
	}
}

// cmdbHooksFile writes a hooks config with one hook, cmdb, for heal_start
// and heal_end at url/heal, and returns its path.
func cmdbHooksFile(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hooks.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, "hooks:\n- {name: cmdb, url: %q, phases: [heal_start, heal_end]}\n",
		url+"/heal"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
