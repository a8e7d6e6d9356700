package framework

import (
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodByPodReasonOfTheDefaultProfile: with the default scheduler profile
// (DynamicResources enabled), a plain pod's group is placed by count, not
// pod by pod; claims, extended resources (which DRA devices may provide)
// and inter-pod terms still go pod by pod. Before DynamicResources counted
// as pod-local, every group of a default profile went pod by pod (the
// 10,000-pod burst of BenchmarkLoop took 5 s at 500 nodes).
func TestPodByPodReasonOfTheDefaultProfile(t *testing.T) {
	h := newHandle(t, NewSnapshot(nil, nil))
	pod := func(edit func(*apiv1.Pod)) *apiv1.Pod {
		p := &apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c",
			Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}}}}}}
		p.Labels = map[string]string{"app": "web"}
		if edit != nil {
			edit(p)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *apiv1.Pod
		want string // a part of the reason; "" for none
	}{
		{"plain", pod(nil), ""},
		{"hugepages and ephemeral storage", pod(func(p *apiv1.Pod) {
			p.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = resource.MustParse("2Mi")
			p.Spec.Containers[0].Resources.Requests[apiv1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}), ""},
		{"extended resource", pod(func(p *apiv1.Pod) {
			p.Spec.Containers[0].Resources.Limits = apiv1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}), "extended resource"},
		{"extended resource of an init container", pod(func(p *apiv1.Pod) {
			p.Spec.InitContainers = []apiv1.Container{{Name: "i", Resources: apiv1.ResourceRequirements{
				Requests: apiv1.ResourceList{"example.com/fpga": resource.MustParse("1")}}}}
		}), "extended resource"},
		{"claim", pod(func(p *apiv1.Pod) {
			p.Spec.ResourceClaims = []apiv1.PodResourceClaim{{Name: "gpu"}}
		}), "resource claims"},
		{"anti-affinity", pod(func(p *apiv1.Pod) {
			p.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{}}
		}), "inter-pod affinity"},
	} {
		got := h.PodByPodReason(tc.pod)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: PodByPodReason = %q, want %q", tc.name, got, tc.want)
		}
	}
}
