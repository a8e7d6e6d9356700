package drain

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

func TestTerminalRule(t *testing.T) {
	tests := []struct {
		phase apiv1.PodPhase
		want  verdict
	}{
		{apiv1.PodSucceeded, leave},
		{apiv1.PodFailed, leave},
		{apiv1.PodRunning, undecided},
		{apiv1.PodPending, undecided},
		{apiv1.PodUnknown, undecided},
	}
	for _, tc := range tests {
		t.Run(string(tc.phase), func(t *testing.T) {
			checkOutcome(t, terminalRule{}.check(makePod("p").Phase(tc.phase).Obj(), &classifyEnv{now: t0}), tc.want, "")
		})
	}
}
