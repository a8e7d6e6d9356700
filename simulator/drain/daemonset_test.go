package drain

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

func TestDaemonSetRule(t *testing.T) {
	tests := []struct {
		name string
		pod  *apiv1.Pod
		want verdict
	}{
		{"DaemonSet controller", makePod("p").DaemonSet("fluentd").Obj(), leave},
		{"third-party DaemonSet kind", makePod("p").Owner("apps.kruise.io/v1alpha1", "DaemonSet", "x").Obj(), leave},
		{"annotation true", makePod("p").Annotate(DaemonSetPodAnnotation, "true").Obj(), leave},
		{"annotation false", makePod("p").Annotate(DaemonSetPodAnnotation, "false").Obj(), undecided},
		{"ReplicaSet pod", makePod("p").ReplicaSet("web").Obj(), undecided},
		{"bare pod", makePod("p").Obj(), undecided},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkOutcome(t, daemonSetRule{}.check(tc.pod, &classifyEnv{now: t0}), tc.want, "")
			if got := IsDaemonSetPod(tc.pod); got != (tc.want == leave) {
				t.Errorf("IsDaemonSetPod = %v", got)
			}
		})
	}
}

func TestEvictDaemonSetPod(t *testing.T) {
	tests := []struct {
		annotation  string // "" means absent
		flagDefault bool
		want        bool
	}{
		{"", true, true},
		{"", false, false},
		{"true", false, true},
		{"false", true, false},
		{"yes", true, true},
		{"yes", false, false},
	}
	for _, tc := range tests {
		b := makePod("p").DaemonSet("ds")
		if tc.annotation != "" {
			b.Annotate(EnableDSEvictionAnnotation, tc.annotation)
		}
		if got := EvictDaemonSetPod(b.Obj(), tc.flagDefault); got != tc.want {
			t.Errorf("annotation %q, flag %v: got %v, want %v", tc.annotation, tc.flagDefault, got, tc.want)
		}
	}
}
