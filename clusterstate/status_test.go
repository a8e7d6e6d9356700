package clusterstate

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// The golden files are upstream's YAML for the same state, written by hand
// from upstream's status types (clusterstate/api/types.go: their JSON names
// and omitempty rules) and its writer (sigs.k8s.io/yaml, through JSON:
// keys sorted, struct fields always present, zero times as null). A change
// of the format here must be a change upstream made too.
func TestStatusIsUpstreamYAML(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("pool-a", 1, 12, 3, nil)
	p.AddNodeGroup("pool-b", 0, 5, 0, nil)
	nodes := append(addNodes(p, "pool-a", 2, true, t0.Add(-time.Hour)), addNodes(p, "pool-a", 1, false, t0.Add(-time.Hour))...)
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nodes, t0)
	r.ScaleDownProbed(t0)
	st := r.Status(t0, func(g string) int {
		if g == "" || g == "pool-a" {
			return 1
		}
		return 0
	})
	compareGolden(t, st, "testdata/status-upstream.yaml")
}

func TestInitializingStatusIsUpstreamYAML(t *testing.T) {
	compareGolden(t, &Status{Time: t0.Format(StatusTimeLayout), AutoscalerStatus: AutoscalerInitializing},
		"testdata/status-upstream-initializing.yaml")
}

func compareGolden(t *testing.T, st *Status, path string) {
	t.Helper()
	got, err := yaml.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("status YAML differs from upstream's (-want +got):\n%s", diff)
	}
}
