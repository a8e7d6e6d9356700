package drain

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
)

func TestLongTerminatingRule(t *testing.T) {
	tests := []struct {
		name        string
		pod         *apiv1.Pod
		maxGraceSec int
		want        verdict
	}{
		{"not deleted", makePod("p").Obj(), 600, undecided},
		{"default grace 30s: 59s after deletion timestamp still waited for",
			makePod("p").Deleted(t0.Add(-59 * time.Second)).Obj(), 600, undecided},
		{"default grace 30s: exactly at grace+margin still waited for",
			makePod("p").Deleted(t0.Add(-60 * time.Second)).Obj(), 600, undecided},
		{"default grace 30s: 61s after deletion timestamp is left",
			makePod("p").Deleted(t0.Add(-61 * time.Second)).Obj(), 600, leave},
		{"grace 0: margin only", makePod("p").Grace(0).Deleted(t0.Add(-31 * time.Second)).Obj(), 600, leave},
		{"grace 300 not over", makePod("p").Grace(300).Deleted(t0.Add(-329 * time.Second)).Obj(), 600, undecided},
		{"grace 300 over", makePod("p").Grace(300).Deleted(t0.Add(-331 * time.Second)).Obj(), 600, leave},
		{"grace 3600 capped at 600", makePod("p").Grace(3600).Deleted(t0.Add(-631 * time.Second)).Obj(), 600, leave},
		{"grace 3600 uncapped with max 0", makePod("p").Grace(3600).Deleted(t0.Add(-631 * time.Second)).Obj(), 0, undecided},
		{"grace 3600 uncapped, over", makePod("p").Grace(3600).Deleted(t0.Add(-3631 * time.Second)).Obj(), 0, leave},
		{"deletion timestamp in the future", makePod("p").Deleted(t0.Add(time.Minute)).Obj(), 600, undecided},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := longTerminatingRule{maxGraceSec: tc.maxGraceSec}
			checkOutcome(t, r.check(tc.pod, &classifyEnv{now: t0}), tc.want, "")
		})
	}
}
