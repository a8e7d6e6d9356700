package drain

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

func TestMirrorRule(t *testing.T) {
	tests := []struct {
		name string
		pod  *apiv1.Pod
		want verdict
	}{
		{"mirror pod is left", makePod("p").Namespace("kube-system").Annotate(apiv1.MirrorPodAnnotationKey, "hash").Obj(), leave},
		{"mirror annotation with empty value still counts", makePod("p").Annotate(apiv1.MirrorPodAnnotationKey, "").Obj(), leave},
		{"ordinary pod defers", makePod("p").Obj(), undecided},
		{"config.source alone is not a mirror", makePod("p").Annotate("kubernetes.io/config.source", "file").Obj(), undecided},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkOutcome(t, mirrorRule{}.check(tc.pod, &classifyEnv{now: t0}), tc.want, "")
			if got := IsMirrorPod(tc.pod); got != (tc.want == leave) {
				t.Errorf("IsMirrorPod = %v", got)
			}
		})
	}
}
