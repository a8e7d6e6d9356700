package builder

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

func TestResourceLimiter(t *testing.T) {
	o := config.Defaults()
	o.Cores = config.Range{Min: 2, Max: 64}
	o.MemoryGiB = config.Range{Min: 0, Max: 256}
	o.GPUTotal = []config.GPULimit{{Type: "nvidia-a100", Min: 0, Max: 8}}
	l := ResourceLimiter(o)
	got := map[string][2]int64{}
	for _, r := range l.GetResources() {
		got[r] = [2]int64{l.GetMin(r), l.GetMax(r)}
	}
	want := map[string][2]int64{"cpu": {2, 64}, "memory": {0, 256 << 30}, "nvidia-a100": {0, 8}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if l.HasMaxLimitSet("tpu") {
		t.Error("unset resource reported as limited")
	}
}
