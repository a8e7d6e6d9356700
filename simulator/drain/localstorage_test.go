package drain

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

func TestLocalStorageRule(t *testing.T) {
	tests := []struct {
		name       string
		pod        *apiv1.Pod
		want       verdict
		wantReason BlockingReason
	}{
		{"no volumes", makePod("p").Obj(), undecided, ""},
		{"configMap only", makePod("p").ConfigMap("cfg").Obj(), undecided, ""},
		{"memory emptyDir", makePod("p").EmptyDir("tmp", apiv1.StorageMediumMemory).Obj(), undecided, ""},
		{"disk emptyDir", makePod("p").EmptyDir("scratch", apiv1.StorageMediumDefault).Obj(), block, LocalStorageRequested},
		{"hugepages emptyDir is not memory", makePod("p").EmptyDir("hp", apiv1.StorageMediumHugePages).Obj(), block, LocalStorageRequested},
		{"hostPath", makePod("p").HostPath("logs").Obj(), block, LocalStorageRequested},
		{"annotation lists every local volume",
			makePod("p").HostPath("logs").EmptyDir("scratch", "").ConfigMap("cfg").
				Annotate(SafeToEvictLocalVolumesAnnotation, "scratch, logs").Obj(), undecided, ""},
		{"annotation lists only some",
			makePod("p").HostPath("logs").EmptyDir("scratch", "").
				Annotate(SafeToEvictLocalVolumesAnnotation, "scratch").Obj(), block, LocalStorageRequested},
		{"annotation lists other names",
			makePod("p").EmptyDir("scratch", "").Annotate(SafeToEvictLocalVolumesAnnotation, "cache,,").Obj(), block, LocalStorageRequested},
		{"empty annotation", makePod("p").EmptyDir("scratch", "").Annotate(SafeToEvictLocalVolumesAnnotation, "").Obj(),
			block, LocalStorageRequested},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkOutcome(t, localStorageRule{}.check(tc.pod, &classifyEnv{now: t0}), tc.want, tc.wantReason)
		})
	}
}
