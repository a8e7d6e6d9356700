package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/snapshotdump"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestDebuggingSnapshot: with --debugging-snapshot-enabled, GET /snapshotz
// answers the next loop's view as JSON: the test's node with its pod, the
// kwok group's template node, the pending pod that fits no group; without
// the flag there is no such endpoint.
func TestDebuggingSnapshot(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("snap")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 2
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, group, framework.TestNamespaceLabel, e.Namespace))
	node := e.CreateNode(framework.MakeNode(framework.UniqueName("existing")).Resources("4", "16Gi", "110").
		Label("pool", "existing").Obj())
	itest.CreatePods(e, "placed", 1, "1", map[string]string{"pool": "existing"})
	e.Eventually(60*time.Second, "the placed pod Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 1)
	})
	itest.CreatePods(e, "toobig", 1, "64", map[string]string{"pool": group}) // fits no node and no template

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--debugging-snapshot-enabled")...)
	e.Eventually(30*time.Second, "the process serves", func(ctx context.Context) (bool, error) {
		code, _, err := p.Get(ctx, "/health-check")
		return err == nil && code > 0, nil
	})
	ctx, cancel := context.WithTimeout(e.Context(), 60*time.Second)
	defer cancel()
	code, body, err := p.Get(ctx, "/snapshotz")
	if err != nil || code != 200 {
		t.Fatalf("/snapshotz = %d, %v: %s", code, err, body)
	}
	var snap snapshotdump.DebuggingSnapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatalf("/snapshotz is not the snapshot's JSON: %v", err)
	}
	if snap.StartTimestamp.IsZero() || snap.EndTimestamp.Before(snap.StartTimestamp) {
		t.Errorf("timestamps %v .. %v", snap.StartTimestamp, snap.EndTimestamp)
	}
	var found bool
	for _, sn := range snap.NodeList {
		if sn.Node.Name != node.Name {
			continue
		}
		found = true
		if len(sn.Pods) != 1 || sn.Pods[0].Name != "placed-0" {
			t.Errorf("node %s has pods %v in the snapshot, want placed-0", node.Name, sn.Pods)
		}
	}
	if !found {
		t.Errorf("node %s is not in the snapshot's NodeList (%d nodes)", node.Name, len(snap.NodeList))
	}
	if tn := snap.TemplateNodes[group]; tn == nil || tn.Node.Labels["pool"] != group {
		t.Errorf("no template node of %s in %v", group, snap.TemplateNodes)
	}
	var pending bool
	for _, pod := range snap.PendingPods {
		pending = pending || (pod.Namespace == e.Namespace && pod.Name == "toobig-0")
	}
	if !pending {
		t.Error("the pending pod is not in the snapshot")
	}

	q := itest.StartAutoscaler(t, "plain", itest.ScaleUpArgs(e, path, "--leader-elect=false")...)
	e.Eventually(30*time.Second, "the second process serves", func(ctx context.Context) (bool, error) {
		code, _, err := q.Get(ctx, "/health-check")
		return err == nil && code > 0, nil
	})
	if code, _, _ := q.Get(e.Context(), "/snapshotz"); code != 404 {
		t.Errorf("/snapshotz without the flag = %d, want 404", code)
	}
}
