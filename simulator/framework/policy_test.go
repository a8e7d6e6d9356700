package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
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

// TestReadsOtherNodes: with the default profile only a pod's own required
// inter-pod terms and DoNotSchedule spread constraints read other nodes;
// with a profile whose default spread constraints are DoNotSchedule, every
// labelled pod without constraints of its own does too, and a walk records
// it (Walk.Wide), so that scale-down keeps no outcome on the walk alone.
func TestReadsOtherNodes(t *testing.T) {
	plain := func() *apiv1.Pod { return makePod("p", "1").Label("app", "web").Obj() }
	antiAffinity := plain()
	antiAffinity.Spec.Affinity = &apiv1.Affinity{PodAntiAffinity: &apiv1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []apiv1.PodAffinityTerm{{TopologyKey: apiv1.LabelHostname}}}}
	preferred := plain()
	preferred.Spec.Affinity = &apiv1.Affinity{PodAffinity: &apiv1.PodAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []apiv1.WeightedPodAffinityTerm{{Weight: 1}}}}
	spread := func(when apiv1.UnsatisfiableConstraintAction) *apiv1.Pod {
		p := plain()
		p.Spec.TopologySpreadConstraints = []apiv1.TopologySpreadConstraint{{MaxSkew: 1,
			TopologyKey: apiv1.LabelHostname, WhenUnsatisfiable: when}}
		return p
	}
	unlabelled := plain()
	unlabelled.Labels = nil

	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	cfg := `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewSnapshot([]*apiv1.Node{makeNode("n", "4").Obj()}, nil)
	spreading, err := New(t.Context(), s, informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		WithSchedulerConfigFile(path))
	if err != nil {
		t.Fatal(err)
	}
	def := newHandle(t, NewSnapshot([]*apiv1.Node{makeNode("n", "4").Obj()}, nil))
	for _, tc := range []struct {
		name                string
		pod                 *apiv1.Pod
		byDefault, spreadBy bool
	}{
		{"plain", plain(), false, true},
		{"without labels", unlabelled, false, false},
		{"required anti-affinity", antiAffinity, true, true},
		{"preferred affinity only", preferred, false, true},
		{"own DoNotSchedule spread", spread(apiv1.DoNotSchedule), true, true},
		{"own ScheduleAnyway spread (the defaults do not apply)", spread(apiv1.ScheduleAnyway), false, false},
	} {
		if got := def.ReadsOtherNodes(tc.pod); got != tc.byDefault {
			t.Errorf("%s, default profile: ReadsOtherNodes = %v, want %v", tc.name, got, tc.byDefault)
		}
		if got := spreading.ReadsOtherNodes(tc.pod); got != tc.spreadBy {
			t.Errorf("%s, DoNotSchedule default constraints: ReadsOtherNodes = %v, want %v", tc.name, got, tc.spreadBy)
		}
	}
	ctx := context.Background()
	for _, h := range []*Handle{def, spreading} {
		var w Walk
		next := 0
		if _, err := h.Prepare(ctx, plain()).FitFromWalk(ctx, func(string) bool { return true }, &next, &w); err != nil {
			t.Fatal(err)
		}
		if want := h == spreading; w.Wide != want {
			t.Errorf("walk of a plain pod: Wide = %v, want %v", w.Wide, want)
		}
	}
}
