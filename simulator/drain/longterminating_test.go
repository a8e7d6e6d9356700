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
		{"not deleted", makePod("p").obj(), 600, undecided},
		{"default grace 30s: 59s after deletion timestamp still waited for",
			makePod("p").deleted(t0.Add(-59 * time.Second)).obj(), 600, undecided},
		{"default grace 30s: exactly at grace+margin still waited for",
			makePod("p").deleted(t0.Add(-60 * time.Second)).obj(), 600, undecided},
		{"default grace 30s: 61s after deletion timestamp is left",
			makePod("p").deleted(t0.Add(-61 * time.Second)).obj(), 600, leave},
		{"grace 0: margin only", makePod("p").grace(0).deleted(t0.Add(-31 * time.Second)).obj(), 600, leave},
		{"grace 300 not over", makePod("p").grace(300).deleted(t0.Add(-329 * time.Second)).obj(), 600, undecided},
		{"grace 300 over", makePod("p").grace(300).deleted(t0.Add(-331 * time.Second)).obj(), 600, leave},
		{"grace 3600 capped at 600", makePod("p").grace(3600).deleted(t0.Add(-631 * time.Second)).obj(), 600, leave},
		{"grace 3600 uncapped with max 0", makePod("p").grace(3600).deleted(t0.Add(-631 * time.Second)).obj(), 0, undecided},
		{"grace 3600 uncapped, over", makePod("p").grace(3600).deleted(t0.Add(-3631 * time.Second)).obj(), 0, leave},
		{"deletion timestamp in the future", makePod("p").deleted(t0.Add(time.Minute)).obj(), 600, undecided},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := longTerminatingRule{maxGraceSec: tc.maxGraceSec}
			checkOutcome(t, r.check(tc.pod, &classifyEnv{now: t0}), tc.want, "")
		})
	}
}
