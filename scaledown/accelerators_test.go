package scaledown

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Intel's and AMD's accelerators count as GPUs as NVIDIA's do, in the
// --gpu-total minimum and in the GPU utilisation threshold.
func TestPlannerCountsEveryAcceleratorAsGPU(t *testing.T) {
	for _, res := range []apiv1.ResourceName{"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/xe", "habana.ai/gaudi"} {
		t.Run(string(res)+" minimum", func(t *testing.T) {
			// Three empty labelled nodes with 2 accelerators each, minimum 3: one may go.
			f := newFixture(t, 0, map[string]string{"a": "", "b": "", "c": ""}, func(o *fixtureOptions) {
				o.GPUTotal = []config.GPULimit{{Type: "acc", Min: 3, Max: 100}}
			})
			for _, n := range f.nodes {
				n.Labels = map[string]string{f.p.GPULabel(): "acc"}
				n.Status.Capacity[res] = resource.MustParse("2")
				n.Status.Allocatable[res] = resource.MustParse("2")
				if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.plan(t, t0)
			plan := f.plan(t, t0.Add(11*time.Minute))
			if len(plan.Removable) != 1 {
				t.Errorf("removable %v, want one (6 GPUs, minimum 3)", names(plan.Removable))
			}
		})
		t.Run(string(res)+" utilisation", func(t *testing.T) {
			// cpu 1 of 4 (0.25) but 1 of 2 accelerators requested (0.5): with a
			// GPU threshold of 0.3 the node is needed; without the accelerator
			// counted it would be unneeded by its cpu.
			f := newFixture(t, 0, map[string]string{"acc": "1", "plain": "1"}, func(o *fixtureOptions) {
				o.NodeGroupDefaults.ScaleDownGPUUtilizationThreshold = 0.3
			})
			for _, n := range f.nodes {
				if n.Name == "acc" {
					n.Status.Capacity[res] = resource.MustParse("2")
					n.Status.Allocatable[res] = resource.MustParse("2")
					if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, p := range f.pods {
				if p.Spec.NodeName == "acc" {
					p.Spec.Containers[0].Resources.Requests[res] = resource.MustParse("1")
				}
			}
			plan := f.plan(t, t0)
			if got := plan.Unremovable["acc"]; got != ReasonNotUnderutilized {
				t.Errorf("accelerator node: reason %q, want %q", got, ReasonNotUnderutilized)
			}
			if got := names(plan.Unneeded); !got["plain"] || got["acc"] {
				t.Errorf("unneeded %v, want plain only", got)
			}
		})
	}
}
