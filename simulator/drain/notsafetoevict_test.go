package drain

import "testing"

func TestNotSafeToEvictRule(t *testing.T) {
	tests := []struct {
		value      string // "" means absent
		want       verdict
		wantReason BlockingReason
	}{
		{"false", block, NotSafeToEvictAnnotation},
		{"true", undecided, ""},
		{"on-completion", undecided, ""},
		{"", undecided, ""},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			b := makePod("p").ReplicaSet("web")
			if tc.value != "" {
				b.Annotate(SafeToEvictAnnotation, tc.value)
			}
			checkOutcome(t, notSafeToEvictRule{}.check(b.Obj(), &classifyEnv{now: t0}), tc.want, tc.wantReason)
		})
	}
}
