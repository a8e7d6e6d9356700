package cloudprovider_test

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// Upstream's accelerators count as GPUs for --gpu-total: a labelled node's
// GPU configuration names the accelerator it has, and its count is the
// accelerator's capacity.
func TestGPUsOfEveryAccelerator(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	for _, res := range []apiv1.ResourceName{"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/xe", "habana.ai/gaudi",
		"microsoft.com/directx"} {
		if !cloudprovider.IsGPUResource(res) {
			t.Errorf("%s is not counted as a GPU resource", res)
		}
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{p.GPULabel(): "acc"}},
			Status: apiv1.NodeStatus{Capacity: apiv1.ResourceList{res: resource.MustParse("4"),
				apiv1.ResourceCPU: resource.MustParse("8")}}}
		if c := p.GetNodeGpuConfig(ctx, n); c == nil || c.ExtendedResourceName != res {
			t.Errorf("%s: GPU config %+v, want the resource %s", res, c, res)
		}
		if typ, count := cloudprovider.GPUsOf(ctx, p, n); typ != "acc" || count != 4 {
			t.Errorf("%s: GPUsOf = %q, %d; want acc, 4", res, typ, count)
		}
	}
	if cloudprovider.IsGPUResource("example.com/fpga") || cloudprovider.IsGPUResource(apiv1.ResourceCPU) {
		t.Errorf("a resource not in the list counted as a GPU")
	}
	// A labelled node whose device plugin has not started: NVIDIA's, as upstream defaults.
	n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{p.GPULabel(): "acc"}}}
	if c := p.GetNodeGpuConfig(ctx, n); c == nil || c.ExtendedResourceName != cloudprovider.DefaultGPUResource {
		t.Errorf("GPU config without a GPU resource %+v, want %s", c, cloudprovider.DefaultGPUResource)
	}
}
