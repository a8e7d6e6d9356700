package explain

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestExplainWhatIfProvisioningRequestAndPrice: `explain -f` on a
// ProvisioningRequest and its PodTemplate (neither created) answers which
// group an atomic scale-up would grow and the conditions the request would
// get; with --expander=price it prices the added nodes from the kwok
// groups' pricePerHour, and says "no price model" for none without the
// price expander's list; nothing is created.
func TestExplainWhatIfProvisioningRequestAndPrice(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	cheap, dear := framework.UniqueName("cheap"), framework.UniqueName("dear")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  maxSize: 5
  pricePerHour: 0.25
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: %[2]s
  maxSize: 5
  pricePerHour: 2
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, cheap, dear, framework.TestNamespaceLabel, e.Namespace))
	manifest := fmt.Sprintf(`apiVersion: v1
kind: PodTemplate
metadata: {name: ppt-train, namespace: %[1]s}
template:
  spec:
    nodeSelector: {%[2]s: %[1]s}
    containers: [{name: c, image: fake, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train, namespace: %[1]s}
spec:
  provisioningClassName: %[3]s
  podSets: [{podTemplateRef: {name: ppt-train}, count: 6}]
`, e.Namespace, framework.TestNamespaceLabel, provreq.ClassBestEffortAtomicScaleUp)
	file := filepath.Join(t.TempDir(), "train.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=kwok", "--kwok-provider-enabled",
		"--cloud-config=" + path, "--enable-provisioning-requests", "--v=2"}
	out, logs, code := runExplain(t, append([]string{"-f", file, "-o", "json", "--expander=price"}, args...)...)
	var got struct {
		Increases []struct {
			NodeGroup string `json:"nodeGroup"`
			Delta     int    `json:"delta"`
			Atomic    bool   `json:"atomic"`
		} `json:"increases"`
		Cost *struct {
			NoModel string             `json:"noPriceModel"`
			PerHour map[string]float64 `json:"perHour"`
			Total   float64            `json:"totalPerHour"`
		} `json:"cost"`
		Objects []struct {
			Kind       string             `json:"kind"`
			Name       string             `json:"name"`
			Pods       int                `json:"pods"`
			PodGroups  []explain.PodGroup `json:"podGroups"`
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"objects"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("explain -f: exit %d, %v:\n%s\nlogs:\n%s", code, err, out, tail(logs, 3000))
	}
	t.Logf("explain -f --expander=price:\n%s", out)
	if len(got.Increases) != 1 || got.Increases[0].NodeGroup != cheap || got.Increases[0].Delta != 2 || !got.Increases[0].Atomic {
		t.Errorf("increases %+v, want an atomic increase of %s by 2", got.Increases, cheap)
	}
	if got.Cost == nil || got.Cost.NoModel != "" || math.Abs(got.Cost.Total-0.5) > 1e-9 || math.Abs(got.Cost.PerHour[cheap]-0.5) > 1e-9 {
		t.Errorf("cost %+v, want 0.5 per hour (2 nodes at 0.25)", got.Cost)
	}
	if len(got.Objects) != 1 || got.Objects[0].Kind != "ProvisioningRequest" || got.Objects[0].Pods != 6 ||
		len(got.Objects[0].PodGroups) == 0 {
		t.Fatalf("objects %+v, want the request with its 6 pods' verdicts", got.Objects)
	}
	if c := provreq.FindCondition(got.Objects[0].Conditions, provreq.ConditionAccepted); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("conditions %+v, want Accepted=True", got.Objects[0].Conditions)
	}
	text, _, _ := runExplain(t, append([]string{"-f", file}, args...)...)
	if !strings.Contains(text, "== ProvisioningRequest "+e.Namespace+"/train: 6 pod(s)") ||
		!strings.Contains(text, "would set Accepted=True") || strings.Contains(text, "Cost") {
		t.Errorf("explain -f text (least-waste, no cost):\n%s", text)
	}
	t.Logf("explain -f:\n%s", text)
	// check-capacity only looks at the existing nodes: there are none, so
	// the request would not be Provisioned, and no group would grow.
	checkFile := filepath.Join(t.TempDir(), "check.yaml")
	if err := os.WriteFile(checkFile, []byte(strings.Replace(manifest, provreq.ClassBestEffortAtomicScaleUp,
		provreq.ClassCheckCapacity, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	check, _, code := runExplain(t, append([]string{"-f", checkFile}, args...)...)
	if code != 0 || !strings.Contains(check, "No node group would grow.") || !strings.Contains(check, "/train: 6 pod(s)") ||
		strings.Contains(check, "not considered") ||
		!strings.Contains(check, "would set Provisioned=False ("+provreq.ReasonCapacityIsNotFound+")") {
		t.Errorf("explain -f of a check-capacity request: exit %d:\n%s", code, check)
	}
	t.Logf("explain -f (check-capacity):\n%s", check)
	list, err := e.PRs.List(e.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("requests in the cluster: %v (%v), want none", list, err)
	}
	if got := itest.NodesPerPool(e.Env); len(got) != 0 {
		t.Errorf("nodes added: %v", got)
	}
}
