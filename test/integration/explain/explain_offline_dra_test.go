package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestExplainSnapshotWithClaimsAsLive: a /snapshotz dump of a cluster with
// a DeviceClass and a ResourceClaimTemplate carries the DRA objects and
// the GPU group's template devices, so that `explain --snapshot -f` of a
// Deployment whose pods claim one device each predicts what `explain -f`
// against the live cluster does: the GPU group grows by 2 nodes (2 devices
// a node, 3 pods), the plain group refuses for want of devices.
func TestExplainSnapshotWithClaimsAsLive(t *testing.T) {
	e := framework.New(t)
	gpu, plain, driver, path := itest.DraGroups(e, 2)
	itest.CreateClaimTemplate(e, "one-gpu", driver, 1)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--debugging-snapshot-enabled")...)
	var body string
	e.Eventually(3*time.Minute, "a /snapshotz dump", func(ctx context.Context) (bool, error) {
		code, b, err := p.Get(ctx, "/snapshotz")
		body = b
		return err == nil && code == 200, nil // not listening yet, or no loop before the deadline: ask again
	})
	var dumped struct {
		TemplateNodes map[string]struct {
			ResourceSlices []json.RawMessage `json:"ResourceSlices"`
		} `json:"TemplateNodes"`
		Objects struct {
			DRA                    bool              `json:"DRA"`
			DeviceClasses          []json.RawMessage `json:"DeviceClasses"`
			ResourceClaimTemplates []json.RawMessage `json:"ResourceClaimTemplates"`
		} `json:"Objects"`
	}
	if err := json.Unmarshal([]byte(body), &dumped); err != nil {
		t.Fatal(err)
	}
	if !dumped.Objects.DRA || len(dumped.Objects.DeviceClasses) == 0 || len(dumped.Objects.ResourceClaimTemplates) == 0 ||
		len(dumped.TemplateNodes[gpu].ResourceSlices) != 1 {
		t.Errorf("dump: DRA %v, %d DeviceClasses, %d ResourceClaimTemplates, %d template slices of %s; want DRA, some, some, 1",
			dumped.Objects.DRA, len(dumped.Objects.DeviceClasses), len(dumped.Objects.ResourceClaimTemplates),
			len(dumped.TemplateNodes[gpu].ResourceSlices), gpu)
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.json")
	if err := os.WriteFile(dump, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: %[1]s}
spec:
  replicas: 3
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      nodeSelector: {%[2]s: %[1]s}
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
      containers:
      - name: c
        image: fake
        resources: {requests: {cpu: "1", memory: 1Gi}, claims: [{name: gpu}]}
`, e.Namespace, framework.TestNamespaceLabel)
	file := filepath.Join(dir, "train.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	liveArgs := []string{"-f", file, "-o", "json", "--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace,
		"--cloud-provider=kwok", "--kwok-provider-enabled", "--cloud-config=" + path, "--v=2"}
	offlineArgs := []string{"--snapshot", dump, "-f", file, "-o", "json", "--namespace=" + e.Namespace, "--v=2"}
	var fromLive, fromDump whatIfAnswer
	explainJSON(t, &fromLive, liveArgs...)
	explainJSON(t, &fromDump, offlineArgs...)
	if diff := cmp.Diff(fromLive.Increases, fromDump.Increases); diff != "" || len(fromDump.Increases) != 1 ||
		fromDump.Increases[0].NodeGroup != gpu || fromDump.Increases[0].Delta != 2 {
		t.Errorf("what-if increases (-live +offline):\n%s\noffline %+v, want %s by 2", diff, fromDump.Increases, gpu)
	}
	if len(fromLive.Objects) != 1 || len(fromDump.Objects) != 1 || len(fromLive.Objects[0].PodGroups) != 1 ||
		len(fromDump.Objects[0].PodGroups) != 1 {
		t.Fatalf("what-if objects: live %+v, offline %+v", fromLive.Objects, fromDump.Objects)
	}
	_, a := comparableVerdicts(fromLive.Objects[0].PodGroups[0])
	_, b := comparableVerdicts(fromDump.Objects[0].PodGroups[0])
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("what-if verdicts (-live +offline):\n%s", diff)
	}
	if v := b[plain]; v.Fits || v.Plugin != "DynamicResources" || !strings.Contains(v.Reason, "of class "+driver) {
		t.Errorf("plain group's offline verdict %+v, want a refusal for the devices of %s", v, driver)
	}
	if got := itest.NodesPerPool(e); len(got) != 0 {
		t.Errorf("nodes added: %v, want none", got)
	}
}
