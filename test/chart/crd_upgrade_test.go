package chart_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/customresources"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestDocumentedCRDUpgradeStep: Helm never upgrades crds/, so the FAQ tells
// operators to apply them after a chart upgrade. The CRD is first written as
// Helm's install writes it (a plain create or update by the manager "helm")
// with an older schema; the FAQ's command then brings it to the chart's
// version (with --force-conflicts: without it, kubectl stops on a conflict
// with Helm's field manager for every changed field, which is how the step
// as first documented failed).
func TestDocumentedCRDUpgradeStep(t *testing.T) {
	env := framework.New(t)
	client, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	manifest, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "crds", "autoscaling.x-k8s.io_provisioningrequests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := customresources.Decode(manifest)
	if err != nil {
		t.Fatal(err)
	}
	old := want.DeepCopy()
	for i := range old.Spec.Versions {
		old.Spec.Versions[i].Schema.OpenAPIV3Schema.Description = "an older chart's schema"
	}
	ctx := env.Context()
	cur, err := crds.Get(ctx, old.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = crds.Create(ctx, old, metav1.CreateOptions{FieldManager: "helm"})
	case err == nil:
		cur.Spec = old.Spec
		_, err = crds.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "helm"})
	}
	if err != nil {
		t.Fatal(err)
	}

	// The FAQ's step, as written there ("How do I install it with Helm?").
	cmd := exec.Command(filepath.Join(repoRoot, "_output", "bin", "kubectl"), "apply", "--server-side", "--force-conflicts", "-f",
		filepath.Join(repoRoot, chartDir, "crds")+"/")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the FAQ's CRD upgrade step failed: %v\n%s", err, out)
	}
	got, err := crds.Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got.Spec.Versions {
		if d := v.Schema.OpenAPIV3Schema.Description; d != want.Spec.Versions[i].Schema.OpenAPIV3Schema.Description {
			t.Errorf("version %s after the upgrade step: schema description %q, want the chart's %q", v.Name, d,
				want.Spec.Versions[i].Schema.OpenAPIV3Schema.Description)
		}
	}
}
