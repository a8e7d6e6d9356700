package expander

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMostPods(t *testing.T) {
	w := newWorld().group("a", nil).group("b", nil).group("c", nil)
	tests := []struct {
		name    string
		options []optionSpec
		want    []string
	}{
		{name: "no option", want: []string{}},
		{name: "most pods wins, even with more nodes", options: []optionSpec{
			{group: "a", nodes: 1, pods: pods(2, "1", "1Gi")},
			{group: "b", nodes: 3, pods: pods(3, "1", "1Gi")},
			{group: "c", nodes: 1, pods: pods(1, "1", "1Gi")},
		}, want: []string{"b/3"}},
		{name: "ties are kept in order", options: []optionSpec{
			{group: "a", nodes: 1, pods: pods(2, "1", "1Gi")},
			{group: "b", nodes: 2, pods: pods(1, "1", "1Gi")},
			{group: "c", nodes: 4, pods: pods(2, "1", "1Gi")},
		}, want: []string{"a/1", "c/4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mostPods{}.BestOptions(t.Context(), w.options(t, tc.options), nil)
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("BestOptions (-want +got):\n%s", diff)
			}
		})
	}
}
