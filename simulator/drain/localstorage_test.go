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
		{"no volumes", makePod("p").obj(), undecided, ""},
		{"configMap only", makePod("p").configMap("cfg").obj(), undecided, ""},
		{"memory emptyDir", makePod("p").emptyDir("tmp", apiv1.StorageMediumMemory).obj(), undecided, ""},
		{"disk emptyDir", makePod("p").emptyDir("scratch", apiv1.StorageMediumDefault).obj(), block, LocalStorageRequested},
		{"hugepages emptyDir is not memory", makePod("p").emptyDir("hp", apiv1.StorageMediumHugePages).obj(), block, LocalStorageRequested},
		{"hostPath", makePod("p").hostPath("logs").obj(), block, LocalStorageRequested},
		{"annotation lists every local volume",
			makePod("p").hostPath("logs").emptyDir("scratch", "").configMap("cfg").
				annotate(SafeToEvictLocalVolumesAnnotation, "scratch, logs").obj(), undecided, ""},
		{"annotation lists only some",
			makePod("p").hostPath("logs").emptyDir("scratch", "").
				annotate(SafeToEvictLocalVolumesAnnotation, "scratch").obj(), block, LocalStorageRequested},
		{"annotation lists other names",
			makePod("p").emptyDir("scratch", "").annotate(SafeToEvictLocalVolumesAnnotation, "cache,,").obj(), block, LocalStorageRequested},
		{"empty annotation", makePod("p").emptyDir("scratch", "").annotate(SafeToEvictLocalVolumesAnnotation, "").obj(),
			block, LocalStorageRequested},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkOutcome(t, localStorageRule{}.check(tc.pod, &classifyEnv{now: t0}), tc.want, tc.wantReason)
		})
	}
}
