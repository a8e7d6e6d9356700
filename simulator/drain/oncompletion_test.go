package drain

import "testing"

func TestOnCompletionRule(t *testing.T) {
	tests := []struct {
		value      string // "" means absent
		want       verdict
		wantReason BlockingReason
	}{
		{"on-completion", block, BlockedByOnCompletion},
		{"true", undecided, ""},
		{"false", undecided, ""},
		{"", undecided, ""},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			b := makePod("p")
			if tc.value != "" {
				b.Annotate(SafeToEvictAnnotation, tc.value)
			}
			checkOutcome(t, onCompletionRule{}.check(b.Obj(), &classifyEnv{now: t0}), tc.want, tc.wantReason)
		})
	}
}
