package expander

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRandom(t *testing.T) {
	w := newWorld().group("a", nil).group("b", nil).group("c", nil)
	options := w.options(t, []optionSpec{{group: "a", nodes: 1}, {group: "b", nodes: 2}, {group: "c", nodes: 3}})
	tests := []struct {
		name    string
		options []Option
		pick    int
		want    string
	}{
		{name: "no option", want: "<nil>"},
		{name: "first", options: options, pick: 0, want: "a/1"},
		{name: "middle", options: options, pick: 1, want: "b/2"},
		{name: "last", options: options, pick: 2, want: "c/3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []int
			r := newRandom(func(n int) int { asked = append(asked, n); return tc.pick })
			if got := id(r.BestOption(t.Context(), tc.options, nil)); got != tc.want {
				t.Errorf("BestOption = %s, want %s", got, tc.want)
			}
			wantFilter := []string{}
			if tc.want != "<nil>" {
				wantFilter = []string{tc.want}
			}
			if diff := cmp.Diff(wantFilter, ids(r.BestOptions(t.Context(), tc.options, nil))); diff != "" {
				t.Errorf("BestOptions (-want +got):\n%s", diff)
			}
			for _, n := range asked {
				if n != len(tc.options) {
					t.Errorf("asked for a number below %d, want below %d", n, len(tc.options))
				}
			}
		})
	}
}

func TestRandomSpreadsChoices(t *testing.T) {
	w := newWorld().group("a", nil).group("b", nil)
	options := w.options(t, []optionSpec{{group: "a", nodes: 1}, {group: "b", nodes: 1}})
	c, err := NewChain(t.Context(), []string{"random"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 200 {
		seen[id(c.BestOption(t.Context(), options, nil))] = true
	}
	if diff := cmp.Diff(map[string]bool{"a/1": true, "b/1": true}, seen); diff != "" {
		t.Errorf("choices over 200 draws with the default source (-want +got):\n%s", diff)
	}
}
