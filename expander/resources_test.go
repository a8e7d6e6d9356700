package expander

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
)

func TestPodRequest(t *testing.T) {
	tests := []struct {
		name            string
		pod             *apiv1.Pod
		wantCPU, wantMB int64 // millicores, MiB
	}{
		{name: "no requests", pod: makePod("p").obj()},
		{name: "one container", pod: makePod("p").req("500m", "1Gi").obj(), wantCPU: 500, wantMB: 1024},
		{name: "containers add up", pod: makePod("p").req("500m", "1Gi").container("1", "512Mi").obj(),
			wantCPU: 1500, wantMB: 1536},
		{name: "a bigger init container wins", pod: makePod("p").req("500m", "1Gi").initContainer("2", "256Mi", false).obj(),
			wantCPU: 2000, wantMB: 1024},
		{name: "init containers do not add up", pod: makePod("p").req("100m", "64Mi").
			initContainer("1", "1Gi", false).initContainer("1", "1Gi", false).obj(), wantCPU: 1000, wantMB: 1024},
		{name: "sidecars run with the containers", pod: makePod("p").req("500m", "1Gi").initContainer("250m", "256Mi", true).obj(),
			wantCPU: 750, wantMB: 1280},
		{name: "init container after a sidecar counts it", pod: makePod("p").req("100m", "64Mi").
			initContainer("250m", "256Mi", true).initContainer("1", "1Gi", false).obj(), wantCPU: 1250, wantMB: 1280},
		{name: "overhead is added", pod: makePod("p").req("500m", "1Gi").overhead("100m", "128Mi").obj(),
			wantCPU: 600, wantMB: 1152},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := []int64{podRequest(tc.pod, apiv1.ResourceCPU), podRequest(tc.pod, apiv1.ResourceMemory) / (1 << 20)}
			if diff := cmp.Diff([]int64{tc.wantCPU, tc.wantMB}, got); diff != "" {
				t.Errorf("[cpu, MiB] (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodUses(t *testing.T) {
	if podUses(makePod("p").req("1", "1Gi").obj(), "nvidia.com/gpu") {
		t.Error("a pod without GPU uses one")
	}
	if !podUses(makePod("p").gpu("1").obj(), "nvidia.com/gpu") {
		t.Error("a pod with a GPU limit does not use one")
	}
}
