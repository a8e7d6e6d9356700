package expander

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLeastNodes(t *testing.T) {
	w := newWorld().group("a", nil).group("b", nil).group("c", nil)
	tests := []struct {
		name    string
		options []optionSpec
		want    []string
	}{
		{name: "no option", want: []string{}},
		{name: "fewest nodes wins, even with fewer pods", options: []optionSpec{
			{group: "a", nodes: 3, pods: pods(6, "1", "1Gi")},
			{group: "b", nodes: 2, pods: pods(1, "1", "1Gi")},
			{group: "c", nodes: 4, pods: pods(6, "1", "1Gi")},
		}, want: []string{"b/2"}},
		{name: "ties are kept in order", options: []optionSpec{
			{group: "a", nodes: 1}, {group: "b", nodes: 2}, {group: "c", nodes: 1},
		}, want: []string{"a/1", "c/1"}},
		{name: "options adding no node are skipped", options: []optionSpec{
			{group: "a", nodes: 0}, {group: "b", nodes: 5}, {group: "c", nodes: -1},
		}, want: []string{"b/5"}},
		{name: "nothing left when no option adds a node", options: []optionSpec{{group: "a", nodes: 0}}, want: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := leastNodes{}.BestOptions(t.Context(), w.options(t, tc.options), nil)
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("BestOptions (-want +got):\n%s", diff)
			}
		})
	}
}
