package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// offlineVerdict is what must agree between a live and an offline explain
// of one node group for one pod group.
type offlineVerdict struct {
	Fits                        bool
	Nodes, Pods                 int
	Chosen                      bool
	Cause, Plugin, Reason, Info string
}

// comparable drops from g what differs between two simulated loops of
// the same cluster (their times).
func comparableVerdicts(g explain.PodGroup) (string, map[string]offlineVerdict) {
	out := map[string]offlineVerdict{}
	for _, v := range g.NodeGroups {
		out[v.NodeGroup] = offlineVerdict{Fits: v.Fits, Nodes: v.Nodes, Pods: v.Pods, Chosen: v.Chosen, Cause: v.Cause,
			Plugin: v.Plugin, Reason: v.Reason, Info: v.Detail}
	}
	return g.Outcome + ": " + g.Message, out
}

// whatIfAnswer is `explain -f -o json`, times left out.
type whatIfAnswer struct {
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

// TestExplainSnapshotAnswersAsTheLiveCluster: a /snapshotz dump taken from
// a running autoscaler, explained offline (`explain --snapshot`, no
// kubeconfig, no cloud config), gives the same verdicts as `explain`
// against the live cluster: for a pending pod three groups refuse (a
// taint, the max size, too little CPU) and for a what-if Deployment that
// one group takes (same group, same node count). A dump without the node
// groups is refused with what it lacks.
func TestExplainSnapshotAnswersAsTheLiveCluster(t *testing.T) {
	e := framework.New(t)
	small, tainted, full := framework.UniqueName("small"), framework.UniqueName("tainted"), framework.UniqueName("full")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  maxSize: 5
  pricePerHour: 0.125
  template:
    labels: {%[4]s: %[5]s, pool: %[1]s}
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
- name: %[2]s
  maxSize: 10
  pricePerHour: 1
  template:
    labels: {%[4]s: %[5]s, pool: %[2]s}
    taints: [{key: dedicated, value: batch, effect: NoSchedule}]
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
- name: %[3]s
  maxSize: 0
  template:
    labels: {%[4]s: %[5]s, pool: %[3]s}
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
`, small, tainted, full, framework.TestNamespaceLabel, e.Namespace))
	itest.DumpPods(e)
	itest.CreatePods(e, "stuck", 1, "3", map[string]string{framework.TestNamespaceLabel: e.Namespace})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--debugging-snapshot-enabled")...)
	live := explainPod(e, p, "stuck-0", "stuck-0 explained by the running autoscaler", func(g explainedPod) bool {
		return len(g.NodeGroups) == 3
	})
	ctx, cancel := context.WithTimeout(e.Context(), 2*time.Minute)
	defer cancel()
	code, body, err := p.Get(ctx, "/snapshotz")
	if err != nil || code != 200 {
		t.Fatalf("/snapshotz = %d, %v: %s", code, err, tail(body, 500))
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.json")
	if err := os.WriteFile(dump, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	liveArgs := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--v=2"}
	offline := func(query ...string) []string {
		return append(append([]string{"--snapshot", dump}, query...), "--namespace="+e.Namespace, "--v=2")
	}

	pod := e.Namespace + "/stuck-0"
	var fromLive, fromDump explainedPod
	explainJSON(t, &fromLive, append([]string{"pod", pod, "-o", "json"}, liveArgs...)...)
	explainJSON(t, &fromDump, offline("pod", pod, "-o", "json")...)
	liveMsg, liveVerdicts := comparableVerdicts(fromLive.PodGroup)
	dumpMsg, dumpVerdicts := comparableVerdicts(fromDump.PodGroup)
	if diff := cmp.Diff(liveVerdicts, dumpVerdicts); diff != "" || liveMsg != dumpMsg {
		t.Errorf("verdicts on %s (-live +offline):\n%s\nmessages: live %q, offline %q", pod, diff, liveMsg, dumpMsg)
	}
	if !fromDump.At.Equal(mustDumpStart(t, body)) {
		t.Errorf("offline loop at %v, want the dump's start", fromDump.At)
	}
	text, _, _ := runExplain(t, offline("pod", pod)...)
	if !strings.Contains(text, "TaintToleration") || !strings.Contains(text, tainted) {
		t.Errorf("explain --snapshot text:\n%s", text)
	}
	t.Logf("explain --snapshot %s pod %s:\n%s", filepath.Base(dump), pod, text)
	// And the running loop said the same, with the causes expected.
	_, running := comparableVerdicts(live.PodGroup)
	if diff := cmp.Diff(running, dumpVerdicts); diff != "" {
		t.Errorf("verdicts on %s (-running autoscaler +offline):\n%s", pod, diff)
	}
	if v := dumpVerdicts[tainted]; v.Plugin != "TaintToleration" {
		t.Errorf("tainted group's offline verdict %+v, want TaintToleration", v)
	}
	if v := dumpVerdicts[full]; v.Cause != explain.CauseMaxSize || v.Info != "target size 0, max size 0" {
		t.Errorf("full group's offline verdict %+v, want max size 0", v)
	}
	if v := dumpVerdicts[small]; v.Fits || !strings.Contains(v.Reason, "Insufficient cpu") {
		t.Errorf("small group's offline verdict %+v, want Insufficient cpu", v)
	}

	// What-if, live and offline.
	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {%[2]s: %[1]s}
      containers: [{name: c, image: fake, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`, e.Namespace, framework.TestNamespaceLabel)
	file := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	var ifLive, ifDump whatIfAnswer
	explainJSON(t, &ifLive, append([]string{"-f", file, "-o", "json"}, liveArgs...)...)
	explainJSON(t, &ifDump, offline("-f", file, "-o", "json")...)
	if diff := cmp.Diff(ifLive.Increases, ifDump.Increases); diff != "" || len(ifDump.Increases) != 1 ||
		ifDump.Increases[0].NodeGroup != small || ifDump.Increases[0].Delta != 3 {
		t.Errorf("what-if increases (-live +offline):\n%s\noffline %+v, want %s by 3", diff, ifDump.Increases, small)
	}
	if len(ifLive.Objects) != 1 || len(ifDump.Objects) != 1 || len(ifLive.Objects[0].PodGroups) != 1 ||
		len(ifDump.Objects[0].PodGroups) != 1 {
		t.Fatalf("what-if objects: live %+v, offline %+v", ifLive.Objects, ifDump.Objects)
	}
	_, a := comparableVerdicts(ifLive.Objects[0].PodGroups[0])
	_, b := comparableVerdicts(ifDump.Objects[0].PodGroups[0])
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("what-if verdicts (-live +offline):\n%s", diff)
	}

	// Priced: the dump's prices give the live pricing model's cost.
	type priced struct {
		Increases []struct {
			NodeGroup string `json:"nodeGroup"`
			Delta     int    `json:"delta"`
		} `json:"increases"`
		Cost *struct {
			NoModel string             `json:"noPriceModel"`
			PerHour map[string]float64 `json:"perHour"`
			Total   float64            `json:"totalPerHour"`
		} `json:"cost"`
	}
	var pricedLive, pricedDump priced
	explainJSON(t, &pricedLive, append([]string{"-f", file, "-o", "json", "--expander=price"}, liveArgs...)...)
	explainJSON(t, &pricedDump, offline("-f", file, "-o", "json", "--expander=price")...)
	if diff := cmp.Diff(pricedLive, pricedDump); diff != "" || pricedDump.Cost == nil || pricedDump.Cost.Total != 0.375 {
		t.Errorf("priced what-if (-live +offline):\n%s\noffline cost %+v, want 0.375 (3 nodes at 0.125)", diff, pricedDump.Cost)
	}

	// A ProvisioningRequest cannot be asked about offline: the dump has none.
	prFile := filepath.Join(dir, "pr.yaml")
	if err := os.WriteFile(prFile, []byte(`apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: ppt}, count: 1}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runExplain(t, offline("-f", prFile)...); code != 1 ||
		!strings.Contains(errOut, "the simulated loop has no ProvisioningRequests") {
		t.Errorf("explain --snapshot -f with a ProvisioningRequest: exit %d, stderr %q", code, tail(errOut, 500))
	}

	// A dump of the old format (no node groups) is refused, saying why.
	var old map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &old); err != nil {
		t.Fatal(err)
	}
	delete(old, "NodeGroups")
	delete(old, "NodeGroupOfNode")
	oldBody, _ := json.Marshal(old)
	oldDump := filepath.Join(dir, "old.json")
	if err := os.WriteFile(oldDump, oldBody, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runExplain(t, "--snapshot", oldDump, "pod", pod)
	if code != 1 || !strings.Contains(errOut, "cannot be explained offline") || !strings.Contains(errOut, "NodeGroups") {
		t.Errorf("explain --snapshot of an old dump: exit %d, stderr %q", code, tail(errOut, 500))
	}
	if got := itest.NodesPerPool(e); len(got) != 0 {
		t.Errorf("nodes added: %v, want none", got)
	}
}

func mustDumpStart(t *testing.T, body string) time.Time {
	t.Helper()
	var d struct {
		StartTimestamp time.Time `json:"StartTimestamp"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	return d.StartTimestamp
}

// explainedNode is `explain node -o json`.
type explainedNode struct {
	At time.Time `json:"at"`
	explain.NodeVerdict
}

// TestExplainSnapshotNamesThePDBAsLive: a node whose pod a PDB guards is
// explained from a /snapshotz dump as against the live cluster: kept,
// blocked by that pod, naming the PDB, with the same utilisation; the
// dump carries the PDB and the pod's ReplicaSet for that.
func TestExplainSnapshotNamesThePDBAsLive(t *testing.T) {
	e := framework.New(t)
	path, group, node := guardedNode(e)
	loopFlags := []string{"--scale-down-unneeded-time=3s", "--scale-down-delay-after-add=0s", "--unremovable-node-recheck-timeout=0s",
		"--namespace=" + e.Namespace, "--v=2"}
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--unremovable-node-recheck-timeout=0s", "--debugging-snapshot-enabled")...)
	e.Eventually(60*time.Second, "the node explained as blocked by the PDB", func(ctx context.Context) (bool, error) {
		code, body, err := p.Explainz(ctx, "format=json&node="+node)
		return err == nil && code == http.StatusOK && strings.Contains(body, `"BlockedByPod"`), nil
	})
	ctx, cancel := context.WithTimeout(e.Context(), 2*time.Minute)
	defer cancel()
	code, body, err := p.Get(ctx, "/snapshotz")
	if err != nil || code != 200 {
		t.Fatalf("/snapshotz = %d, %v: %s", code, err, tail(body, 500))
	}
	dump := filepath.Join(t.TempDir(), "dump.json")
	if err := os.WriteFile(dump, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var live, offline explainedNode
	explainJSON(t, &live, append([]string{"node", node, "-o", "json", "--kubeconfig=" + e.Kubeconfig, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path}, loopFlags...)...)
	explainJSON(t, &offline, append([]string{"--snapshot", dump, "node", node, "-o", "json"}, loopFlags...)...)
	type verdict struct {
		NodeGroup, Reason, Detail string
		Utilization               *float64
	}
	lv := verdict{live.NodeGroup, live.Reason, live.Detail, live.Utilization}
	ov := verdict{offline.NodeGroup, offline.Reason, offline.Detail, offline.Utilization}
	if diff := cmp.Diff(lv, ov); diff != "" {
		t.Errorf("verdict on node %s (-live +offline):\n%s", node, diff)
	}
	if wantPDB := fmt.Sprintf("PodDisruptionBudget %s/guarded", e.Namespace); ov.Reason != "BlockedByPod" ||
		!strings.Contains(ov.Detail, wantPDB) || ov.NodeGroup != group {
		t.Errorf("offline verdict %+v, want BlockedByPod naming %s in group %s", ov, wantPDB, group)
	}
}

// TestExplainSnapshotPriorityExpanderAsLive: the priority expander's
// ConfigMap travels in the dump, so that a what-if under --expander=priority
// grows the group the ConfigMap prefers (the large one, which least-waste
// would not pick) offline as live.
func TestExplainSnapshotPriorityExpanderAsLive(t *testing.T) {
	e := framework.New(t)
	small, large := framework.UniqueName("small"), framework.UniqueName("large")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "16", memory: 64Gi, pods: "110"}
`, small, large, framework.TestNamespaceLabel, e.Namespace))
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(),
		itest.PriorityConfigMap(e, fmt.Sprintf("20:\n  - ^%s$\n10:\n  - .*\n", large)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--debugging-snapshot-enabled", "--expander=priority")...)
	e.Eventually(30*time.Second, "the process serves", func(ctx context.Context) (bool, error) {
		code, _, err := p.Get(ctx, "/health-check")
		return err == nil && code > 0, nil
	})
	ctx, cancel := context.WithTimeout(e.Context(), 2*time.Minute)
	defer cancel()
	code, body, err := p.Get(ctx, "/snapshotz")
	if err != nil || code != 200 {
		t.Fatalf("/snapshotz = %d, %v: %s", code, err, tail(body, 500))
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.json")
	if err := os.WriteFile(dump, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {%[2]s: %[1]s}
      containers: [{name: c, image: fake, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`, e.Namespace, framework.TestNamespaceLabel)), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--namespace=" + e.Namespace, "--expander=priority", "--v=2"}
	var live, offline whatIfAnswer
	explainJSON(t, &live, append([]string{"-f", file, "-o", "json", "--kubeconfig=" + e.Kubeconfig, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path}, flags...)...)
	explainJSON(t, &offline, append([]string{"--snapshot", dump, "-f", file, "-o", "json"}, flags...)...)
	if diff := cmp.Diff(live.Increases, offline.Increases); diff != "" || len(offline.Increases) != 1 ||
		offline.Increases[0].NodeGroup != large {
		t.Errorf("increases (-live +offline):\n%s\noffline %+v, want %s as the ConfigMap prefers", diff, offline.Increases, large)
	}
}

// explainJSON runs `cluster-autoscaler explain` with args and decodes its
// JSON answer into into; a non-zero exit or an answer that does not decode
// fails the test with the command's output and logs.
func explainJSON(t *testing.T, into any, args ...string) {
	t.Helper()
	out, logs, code := runExplain(t, args...)
	if err := json.Unmarshal([]byte(out), into); err != nil || code != 0 {
		t.Fatalf("explain %v: exit %d, %v:\n%s\nlogs:\n%s", args, code, err, out, tail(logs, 3000))
	}
}
