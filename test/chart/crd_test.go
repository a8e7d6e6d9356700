package chart_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	buffercrd "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/crd"
	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	provreqcrd "k8s.io/autoscaler/cluster-autoscaler/provreq/crd"
)

// TestChartCRDsAreTheGeneratedCRDs: the chart ships exactly the CRDs that
// hack/update-codegen.sh generates into provreq/crd and capacitybuffer/crd,
// so they cannot drift; Helm installs the files of crds/ before the
// templates.
func TestChartCRDsAreTheGeneratedCRDs(t *testing.T) {
	sources := map[string][]byte{
		"provreq/crd/autoscaling.x-k8s.io_provisioningrequests.yaml":   provreqcrd.Manifest(),
		"capacitybuffer/crd/autoscaling.x-k8s.io_capacitybuffers.yaml": buffercrd.Manifest(),
		"capacityquota/autoscaling.x-k8s.io_capacityquotas.yaml":       capacityquota.Manifest(),
	}
	var want []string
	for source, embedded := range sources {
		name := filepath.Base(source)
		want = append(want, name)
		got, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		generated, err := os.ReadFile(filepath.Join(repoRoot, source))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, generated) || !bytes.Equal(got, embedded) {
			t.Errorf("%s/crds/%s differs from %s; copy it:\n  cp %s %s/crds/", chartDir, name, source, source, chartDir)
		}
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot, chartDir, "crds"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s/crds holds %v, want %v", chartDir, got, want)
	}
}
