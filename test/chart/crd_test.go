package chart_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/crd"
)

// crdFile is the chart's copy of the ProvisioningRequest CRD; Helm installs
// the files of crds/ before the templates.
const crdFile = "crds/autoscaling.x-k8s.io_provisioningrequests.yaml"

// TestChartCRDIsProvreqCRD: the chart ships exactly the CRD that
// hack/update-codegen.sh generates into provreq/crd, so they cannot drift.
func TestChartCRDIsProvreqCRD(t *testing.T) {
	got, err := os.ReadFile(filepath.Join(repoRoot, chartDir, crdFile))
	if err != nil {
		t.Fatal(err)
	}
	source := filepath.Join(repoRoot, "provreq", "crd", filepath.Base(crdFile))
	want, err := os.ReadFile(source)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || !bytes.Equal(got, crd.Manifest()) {
		t.Fatalf("%s/%s differs from %s; copy it:\n  cp provreq/crd/%s %s/crds/",
			chartDir, crdFile, source, filepath.Base(crdFile), chartDir)
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot, chartDir, "crds"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("%s/crds holds %d files, want only %s and %s", chartDir, len(entries), filepath.Base(crdFile),
			filepath.Base(quotaCRDFile))
	}
}

// quotaCRDFile is the chart's copy of the CapacityQuota CRD.
const quotaCRDFile = "crds/autoscaling.x-k8s.io_capacityquotas.yaml"

// TestChartCRDIsCapacityQuotaCRD: the chart ships the CapacityQuota CRD the
// binary embeds.
func TestChartCRDIsCapacityQuotaCRD(t *testing.T) {
	got, err := os.ReadFile(filepath.Join(repoRoot, chartDir, quotaCRDFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, capacityquota.Manifest()) {
		t.Fatalf("%s/%s differs from capacityquota/%s; copy it:\n  cp capacityquota/%s %s/crds/",
			chartDir, quotaCRDFile, filepath.Base(quotaCRDFile), filepath.Base(quotaCRDFile), chartDir)
	}
}
