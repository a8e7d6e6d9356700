package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// explainedPod is /explainz?pod=...&format=json.
type explainedPod struct {
	At time.Time `json:"at"`
	explain.PodGroup
}

// explainPod waits until the autoscaler's /explainz record of pod (in the
// test's namespace) satisfies ok, and returns it.
func explainPod(e *framework.Env, p *itest.AutoscalerProcess, pod, what string, ok func(explainedPod) bool) explainedPod {
	e.T.Helper()
	var got explainedPod
	var last string
	defer func() {
		if e.T.Failed() {
			e.T.Logf("last /explainz answer for %s: %s", pod, last)
		}
	}()
	e.Eventually(90*time.Second, what, func(ctx context.Context) (bool, error) {
		code, body, err := p.Explainz(ctx, "format=json&pod="+e.Namespace+"/"+pod)
		if err == nil {
			last = body
		}
		if err != nil || code != http.StatusOK {
			return false, nil // not yet recorded: ask again
		}
		got = explainedPod{}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			return false, fmt.Errorf("decoding %q: %w", body, err)
		}
		return ok(got), nil
	})
	return got
}

// verdictOf is the verdict of node group id in g.
func verdictOf(g explainedPod, id string) (explain.NodeGroupVerdict, bool) {
	for _, v := range g.NodeGroups {
		if v.NodeGroup == id {
			return v, true
		}
	}
	return explain.NodeGroupVerdict{}, false
}

// TestExplainzNamesTaintMaxSizeAndBackoff: a pod three groups refuse (a
// taint it does not tolerate, the max size, a back-off after the cloud ran
// out of capacity) gets from /explainz each group's refusal with its cause
// and numbers: the plugin and the taint, the target and max size, the
// back-off's error code and end; and a pod the loop never saw gets a 404
// that says so. By default it is served on --explain-address only: the
// metrics port answers 404.
func TestExplainzNamesTaintMaxSizeAndBackoff(t *testing.T) {
	e := framework.New(t)
	path, tainted, full, refused := itest.ThreeRefusingGroups(e)
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 1, "1", map[string]string{framework.TestNamespaceLabel: e.Namespace})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	got := explainPod(e, p, "web-0", "web-0 explained with the back-off", func(g explainedPod) bool {
		v, ok := verdictOf(g, refused)
		return ok && v.Cause == explain.CauseBackoff
	})
	taint, _ := verdictOf(got, tainted)
	if taint.Cause != explain.CauseScheduler || taint.Plugin != "TaintToleration" ||
		taint.Reason != "node(s) had untolerated taint(s) (dedicated=batch:NoSchedule)" || taint.Fits {
		t.Errorf("tainted group's verdict %+v, want the TaintToleration plugin naming dedicated=batch:NoSchedule", taint)
	}
	max, _ := verdictOf(got, full)
	if max.Cause != explain.CauseMaxSize || max.Reason != "max node group size reached" || max.Detail != "target size 0, max size 0" {
		t.Errorf("full group's verdict %+v, want max size with target size 0, max size 0", max)
	}
	back, _ := verdictOf(got, refused)
	if back.Reason != "in backoff after failed scale-up (STOCKOUT)" || back.Until == nil || !back.Until.After(got.At) {
		t.Errorf("refused group's verdict %+v, want the STOCKOUT back-off with its end after the loop (%v)", back, got.At)
	}
	if got.Outcome != explain.OutcomeNoScaleUp || !strings.HasPrefix(got.Message, "pod didn't trigger scale-up: ") {
		t.Errorf("outcome %q, message %q; want no scale-up with the event's message", got.Outcome, got.Message)
	}
	// The text a person reads: one row per group, the reason and numbers in it.
	_, text, err := p.Explainz(e.Context(), "pod="+e.Namespace+"/web-0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NODE GROUP", "VERDICT", "NODES", "REASON", tainted + "  refused", "TaintToleration: node(s) had untolerated taint(s)",
		"max node group size reached; target size 0, max size 0", "in backoff after failed scale-up (STOCKOUT)", "; until "} {
		if !strings.Contains(text, want) {
			t.Errorf("/explainz text lacks %q:\n%s", want, text)
		}
	}
	code, body, err := p.Explainz(e.Context(), "pod="+e.Namespace+"/no-such-pod")
	if err != nil || code != http.StatusNotFound || !strings.Contains(body, "was not among the pending pods") {
		t.Errorf("/explainz for an unknown pod: %d %q %v, want 404 saying it was not among the pending pods", code, body, err)
	}
	// Private by default: the metrics port, which the chart's Service
	// exposes to the cluster, does not serve it.
	code, body, err = p.Get(e.Context(), "/explainz?pod="+e.Namespace+"/web-0")
	if err != nil || code != http.StatusNotFound || strings.Contains(body, "web-0") {
		t.Errorf("/explainz on --address: %d %q %v, want 404 without --explain-on-metrics-port", code, body, err)
	}
}

// TestExplainzShowsChosenGroupAndSelector: a pod that fits both groups is
// shown the group the expander chose (the one that then gets the node),
// marked, with the nodes it takes, for as long as it waits for that node;
// a pod whose nodeSelector no template has gets NodeAffinity's refusal
// from every group.
func TestExplainzShowsChosenGroupAndSelector(t *testing.T) {
	e := framework.New(t)
	small, large := framework.UniqueName("small"), framework.UniqueName("large")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 20s}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  faults: {registrationDelay: 20s}
`, small, large, framework.TestNamespaceLabel, e.Namespace))
	itest.DumpPods(e)
	itest.CreatePods(e, "fit", 1, "1", map[string]string{framework.TestNamespaceLabel: e.Namespace})
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(),
		framework.MakePod(e.Namespace, "selector").Req("1", "1Gi").NodeSelector("pool", "missing").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	// The text is read right after the JSON that shows the choice: the
	// loop after a scale-up runs at once, and its record (the pod fits the
	// upcoming node) replaces the one that chose.
	var text string
	got := explainPod(e, p, "fit-0", "fit-0 shown its chosen group", func(g explainedPod) bool {
		for _, v := range g.NodeGroups {
			if v.Chosen {
				_, t, err := p.Explainz(e.Context(), "pod="+e.Namespace+"/fit-0")
				text = t
				return err == nil && strings.Contains(t, "Loop at "+g.At.UTC().Format(time.RFC3339)+"\n")
			}
		}
		return false
	})
	if !strings.Contains(text, "*  "+small+"  fits") {
		t.Errorf("/explainz text does not mark %s as chosen:\n%s", small, text)
	}
	chosen := got.NodeGroups[0]
	if !chosen.Chosen || !chosen.Fits || chosen.Nodes != 1 || chosen.Pods != 1 || chosen.NodeGroup != small ||
		!strings.Contains(chosen.Why, "--expander=least-waste") {
		t.Errorf("chosen verdict %+v, want %s chosen by least-waste, 1 node for 1 pod", chosen, small)
	}
	if other, ok := verdictOf(got, large); !ok || !other.Fits || other.Chosen {
		t.Errorf("%s's verdict %+v (found %v), want it fits, not chosen", large, other, ok)
	}
	e.Eventually(60*time.Second, "the chosen group's node added", func(context.Context) (bool, error) {
		return itest.NodesPerPool(e)[small] == 1, nil
	})
	if got := itest.NodesPerPool(e); got[large] != 0 {
		t.Errorf("nodes per pool %v, want only %s's", got, small)
	}
	sel := explainPod(e, p, "selector", "selector refused by NodeAffinity everywhere", func(g explainedPod) bool {
		return len(g.NodeGroups) == 2
	})
	for _, v := range sel.NodeGroups {
		if v.Fits || v.Cause != explain.CauseScheduler || v.Plugin != "NodeAffinity" ||
			v.Reason != "node(s) didn't match Pod's node affinity/selector" {
			t.Errorf("selector's verdict %+v, want NodeAffinity's refusal", v)
		}
	}
}

// TestExplainzNamesMaxNodesTotal: with --max-nodes-total reached, the pod
// left is shown that limit with the cluster's node count.
func TestExplainzNamesMaxNodesTotal(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("capped")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	itest.GroupNode(e, group, group+"-first", nil)
	nodes, _ := itest.ClusterCapacity(e)
	itest.CreatePods(e, "wait", 2, "3", map[string]string{"pool": group})
	var pending string
	e.Eventually(60*time.Second, "one pod scheduled, one pending", func(ctx context.Context) (bool, error) {
		list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		scheduled := 0
		for _, pod := range list.Items {
			if pod.Spec.NodeName != "" {
				scheduled++
			} else {
				pending = pod.Name
			}
		}
		return scheduled == 1 && pending != "", nil
	})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, fmt.Sprintf("--max-nodes-total=%d", nodes))...)
	got := explainPod(e, p, pending, pending+" explained", func(g explainedPod) bool { return len(g.NodeGroups) > 0 })
	v, _ := verdictOf(got, group)
	wantReason := fmt.Sprintf("max total nodes in cluster reached (--max-nodes-total=%d)", nodes)
	if v.Cause != explain.CauseMaxNodesTotal || v.Reason != wantReason || !strings.Contains(v.Detail, fmt.Sprintf("the cluster has %d nodes", nodes)) {
		t.Errorf("verdict %+v, want %q with the cluster's %d nodes", v, wantReason, nodes)
	}
	if got := len(itest.NodeNames(e, group)); got != 1 {
		t.Errorf("the group has %d nodes, want its 1", got)
	}
}

// TestExplainzNamesThePDB: a node kept because the PDB of its only pod
// allows no disruption is explained by /explainz?node= with that pod and
// that PDB.
func TestExplainzNamesThePDB(t *testing.T) {
	e := framework.New(t)
	path, group, node := guardedNode(e)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--unremovable-node-recheck-timeout=0s")...)
	var got explain.NodeVerdict
	var last string
	e.Eventually(60*time.Second, "the node explained as blocked by the PDB", func(ctx context.Context) (bool, error) {
		code, body, err := p.Explainz(ctx, "format=json&node="+node)
		if err == nil {
			last = body
		}
		if err != nil || code != http.StatusOK {
			return false, nil
		}
		got = explain.NodeVerdict{}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			return false, err
		}
		return got.Reason == "BlockedByPod", nil
	})
	wantPDB := fmt.Sprintf("PodDisruptionBudget %s/guarded", e.Namespace)
	if !strings.Contains(got.Detail, wantPDB) || !strings.Contains(got.Detail, "NotEnoughPdb") || got.NodeGroup != group ||
		got.Utilization == nil || got.Threshold == nil {
		t.Errorf("node verdict %+v (%s), want the pod, NotEnoughPdb, %s, the group and its utilisation", got, last, wantPDB)
	}
	_, text, err := p.Explainz(e.Context(), "node="+node)
	if err != nil || !strings.Contains(text, "Reason:") || !strings.Contains(text, wantPDB) {
		t.Errorf("/explainz text %q (%v), want the reason and %s", text, err, wantPDB)
	}
	if _, err := e.Client.CoreV1().Nodes().Get(e.Context(), node, metav1.GetOptions{}); err != nil {
		t.Errorf("node %s: %v, want it kept", node, err)
	}
}

// runExplain runs `cluster-autoscaler explain args...` to its end.
func runExplain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, itest.AutoscalerBinary, append([]string{"explain"}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running explain: %v", err)
	}
	return out.String(), errOut.String(), code
}

// TestExplainCommandPredictsWithoutWriting: with no autoscaler running,
// `cluster-autoscaler explain pod` simulates one loop on the live cluster
// and shows the group a scale-up would choose, in text and in JSON,
// attempting no write (its stderr has no line of a write the read-only
// client or provider refused): no node is added, no event recorded; an
// unknown node is told as such, exit code 1.
func TestExplainCommandPredictsWithoutWriting(t *testing.T) {
	e := framework.New(t)
	path, small, large := itest.ScaleUpConfig(e)
	itest.DumpPods(e)
	itest.CreatePods(e, "fit", 1, "1", map[string]string{framework.TestNamespaceLabel: e.Namespace})
	e.Eventually(30*time.Second, "fit-0 marked unschedulable", func(ctx context.Context) (bool, error) {
		pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, "fit-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == "PodScheduled" && c.Reason == "Unschedulable" {
				return true, nil
			}
		}
		return false, nil
	})
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--v=2"}
	out, logs, code := runExplain(t, append([]string{"pod", e.Namespace + "/fit-0"}, args...)...)
	if code != 0 || !strings.Contains(out, "*  "+small+"  fits     1") || !strings.Contains(out, large+"  fits") {
		t.Errorf("explain pod: exit %d, output:\n%s\nwant %s marked chosen with 1 node; logs:\n%s", code, out, small, logs)
	}
	// Nothing was attempted that the read-only client or provider had to
	// refuse (no event, no candidate taint, no provider state saved).
	if strings.Contains(logs, "read-only") {
		t.Errorf("explain attempted writes; logs:\n%s", logs)
	}
	out, logs, code = runExplain(t, append([]string{"pod", e.Namespace + "/fit-0", "-o", "json"}, args...)...)
	if strings.Contains(logs, "read-only") {
		t.Errorf("explain -o json attempted writes; logs:\n%s", logs)
	}
	var got explainedPod
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("explain -o json: exit %d, %v:\n%s", code, err, out)
	}
	if v, ok := verdictOf(got, small); !ok || !v.Chosen || v.Nodes != 1 {
		t.Errorf("JSON verdict of %s: %+v (found %v), want chosen, 1 node", small, v, ok)
	}
	_, errOut, code := runExplain(t, append([]string{"node", "no-such-node"}, args...)...)
	if code != 1 || !strings.Contains(errOut, "node no-such-node has no scale-down verdict") {
		t.Errorf("explain node no-such-node: exit %d, stderr tail %q", code, tail(errOut, 300))
	}
	if got := itest.NodesPerPool(e); len(got) != 0 {
		t.Errorf("nodes added by explain: %v, want none", got)
	}
	if msgs, err := itest.PodEventMessages(e.Context(), e, "fit-0", "TriggeredScaleUp"); err != nil || len(msgs) != 0 {
		t.Errorf("TriggeredScaleUp events %q (%v), want none: explain must not record events", msgs, err)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// TestExplainWhatIfPredictsTheScaleUp: `explain -f` on a Deployment of 200
// one-CPU pods (the size) predicts the group and the node count that a real scale-up
// then adds when the Deployment is created and the autoscaler runs.
func TestExplainWhatIfPredictsTheScaleUp(t *testing.T) {
	e := framework.New(t)
	small, large := framework.UniqueName("small"), framework.UniqueName("large")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  maxSize: 60
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: %[2]s
  maxSize: 60
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "16", memory: 64Gi, pods: "110"}
`, small, large, framework.TestNamespaceLabel, e.Namespace))
	itest.DumpPods(e)
	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 200
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {%[2]s: %[1]s}
      containers: [{name: c, image: fake, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`, e.Namespace, framework.TestNamespaceLabel)
	file := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--v=2"}
	out, logs, code := runExplain(t, append([]string{"-f", file, "-o", "json"}, args...)...)
	var got struct {
		Increases []struct {
			NodeGroup string `json:"nodeGroup"`
			Delta     int    `json:"delta"`
		} `json:"increases"`
		Objects []struct {
			Kind      string             `json:"kind"`
			Pods      int                `json:"pods"`
			PodGroups []explain.PodGroup `json:"podGroups"`
		} `json:"objects"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("explain -f: exit %d, %v:\n%s\nlogs:\n%s", code, err, out, tail(logs, 3000))
	}
	predicted := map[string]int{}
	for _, inc := range got.Increases {
		predicted[inc.NodeGroup] += inc.Delta
	}
	if len(predicted) != 1 || predicted[small] == 0 || len(got.Objects) != 1 || got.Objects[0].Pods != 200 {
		t.Fatalf("prediction %v for %+v, want one group (least-waste: %s)", predicted, got.Objects, small)
	}
	t.Logf("explain -f predicts %v", predicted)
	if got := itest.NodesPerPool(e); len(got) != 0 {
		t.Fatalf("explain -f added nodes %v", got)
	}
	text, _, _ := runExplain(t, append([]string{"-f", file}, args...)...)
	if !strings.Contains(text, fmt.Sprintf("Node group %s would grow by %d node(s)", small, predicted[small])) ||
		!strings.Contains(text, "== Deployment "+e.Namespace+"/web: 200 pod(s)") {
		t.Errorf("explain -f text:\n%s", text)
	}

	// Now for real.
	dep := &appsv1.Deployment{}
	if err := yaml.Unmarshal([]byte(manifest), dep); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	e.Eventually(3*time.Minute, "the 200 pods running", func(ctx context.Context) (bool, error) {
		running, _, err := itest.PodsOf(ctx, e, "web")
		return running == 200, err
	})
	if diff := cmp.Diff(predicted, itest.NodesPerPool(e)); diff != "" {
		t.Errorf("nodes added (-predicted +real):\n%s", diff)
	}
}

// guardedNode gives a kwok group one node running the single 500m pod of
// ReplicaSet "guarded", whose PodDisruptionBudget allows no disruption, and
// waits for the pod to run; it returns the kwok config, the group and the
// node.
func guardedNode(e *framework.Env) (path, group, node string) {
	group = framework.UniqueName("guarded")
	path, node = itest.GroupsConfig(e, group), group+"-n"
	itest.GroupNode(e, group, node, nil)
	itest.DumpPods(e)
	itest.ReplicaSet(e, "guarded", group, 1, "500m", false)
	zero := intstr.FromInt32(0)
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	e.Eventually(30*time.Second, "the guarded pod running", func(ctx context.Context) (bool, error) {
		running, _, err := itest.PodsOf(ctx, e, "guarded")
		return running == 1, err
	})
	return path, group, node
}
