package expander

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

func TestPodRequest(t *testing.T) {
	tests := []struct {
		name            string
		pod             *apiv1.Pod
		wantCPU, wantMB int64 // millicores, MiB
	}{
		{name: "no requests", pod: testbuild.Pod("p").Obj()},
		{name: "one container", pod: testbuild.Pod("p").Req("500m", "1Gi").Obj(), wantCPU: 500, wantMB: 1024},
		{name: "containers add up", pod: testbuild.Pod("p").Req("500m", "1Gi").Container("1", "512Mi").Obj(),
			wantCPU: 1500, wantMB: 1536},
		{name: "a bigger init container wins", pod: testbuild.Pod("p").Req("500m", "1Gi").InitContainer("2", "256Mi", false).Obj(),
			wantCPU: 2000, wantMB: 1024},
		{name: "init containers do not add up", pod: testbuild.Pod("p").Req("100m", "64Mi").
			InitContainer("1", "1Gi", false).InitContainer("1", "1Gi", false).Obj(), wantCPU: 1000, wantMB: 1024},
		{name: "sidecars run with the containers", pod: testbuild.Pod("p").Req("500m", "1Gi").InitContainer("250m", "256Mi", true).Obj(),
			wantCPU: 750, wantMB: 1280},
		{name: "init container after a sidecar counts it", pod: testbuild.Pod("p").Req("100m", "64Mi").
			InitContainer("250m", "256Mi", true).InitContainer("1", "1Gi", false).Obj(), wantCPU: 1250, wantMB: 1280},
		{name: "overhead is added", pod: testbuild.Pod("p").Req("500m", "1Gi").Overhead("100m", "128Mi").Obj(),
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
	if podUses(testbuild.Pod("p").Req("1", "1Gi").Obj(), "nvidia.com/gpu") {
		t.Error("a pod without GPU uses one")
	}
	if !podUses(testbuild.Pod("p").GPU("1").Obj(), "nvidia.com/gpu") {
		t.Error("a pod with a GPU limit does not use one")
	}
}
