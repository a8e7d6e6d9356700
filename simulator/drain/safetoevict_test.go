package drain

import "testing"

func TestSafeToEvictRule(t *testing.T) {
	tests := []struct {
		value string // "" means absent
		want  verdict
	}{
		{"true", move},
		{"false", undecided},
		{"on-completion", undecided},
		{"True", undecided},
		{"", undecided},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			b := makePod("p")
			if tc.value != "" {
				b.Annotate(SafeToEvictAnnotation, tc.value)
			}
			checkOutcome(t, safeToEvictRule{}.check(b.Obj(), &classifyEnv{now: t0}), tc.want, "")
		})
	}
}
