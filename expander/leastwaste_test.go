package expander

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

func TestLeastWaste(t *testing.T) {
	w := newWorld().
		group("small", templateNode("small", "2", "8Gi")).
		group("medium", templateNode("medium", "4", "16Gi")).
		group("large", templateNode("large", "8", "32Gi")).
		group("highmem", templateNode("highmem", "2", "32Gi")).
		group("twin", templateNode("twin", "4", "16Gi")).
		group("no-template", nil).
		group("no-capacity", templateNode("no-capacity", "", ""))
	tests := []struct {
		name    string
		options []optionSpec
		want    []string
	}{
		{name: "no option", want: []string{}},
		{name: "the best fitting node wins", options: []optionSpec{
			// 3 cpu, 12Gi: small x2 wastes .25+.25, medium x1 .25+.25, large x1 .625+.625
			{group: "small", nodes: 2, pods: pods(3, "1", "4Gi")},
			{group: "medium", nodes: 1, pods: pods(3, "1", "4Gi")},
			{group: "large", nodes: 1, pods: pods(3, "1", "4Gi")},
			// 1 cpu-heavy pod: highmem wastes 0 cpu but 28/32 memory
			{group: "highmem", nodes: 1, pods: pods(1, "2", "4Gi")},
		}, want: []string{"small/2", "medium/1"}},
		{name: "cpu and memory waste add up", options: []optionSpec{
			// 999m, 24Gi: highmem wastes .50+.25, medium x2 and large .875+.25
			{group: "highmem", nodes: 1, pods: pods(3, "333m", "8Gi")},
			{group: "medium", nodes: 2, pods: pods(3, "333m", "8Gi")},
			{group: "large", nodes: 1, pods: pods(3, "333m", "8Gi")},
		}, want: []string{"highmem/1"}},
		{name: "capacity counts, not allocatable", options: []optionSpec{
			// allocatable is 100m/100Mi everywhere; by capacity medium fits exactly
			{group: "medium", nodes: 1, pods: pods(4, "1", "4Gi")},
			{group: "large", nodes: 1, pods: pods(4, "1", "4Gi")},
		}, want: []string{"medium/1"}},
		{name: "effective pod requests include init containers", options: []optionSpec{
			// each pod holds 2 cpu while initialising: 4 cpu, 4Gi in total, so medium
			// wastes 0+.75 and small .5+.5 (counting only containers, medium would waste .95+.75)
			{group: "medium", nodes: 1, pods: []*apiv1.Pod{
				testbuild.Pod("a").Req("100m", "2Gi").InitContainer("2", "", false).Obj(),
				testbuild.Pod("b").Req("100m", "2Gi").InitContainer("2", "", false).Obj(),
			}},
			{group: "small", nodes: 1, pods: []*apiv1.Pod{
				testbuild.Pod("c").Req("1", "4Gi").Obj(),
			}},
		}, want: []string{"medium/1"}},
		{name: "options without a template or capacity are skipped", options: []optionSpec{
			{group: "no-template", nodes: 1, pods: pods(1, "1", "1Gi")},
			{group: "no-capacity", nodes: 1, pods: pods(1, "1", "1Gi")},
			{group: "large", nodes: 1, pods: pods(1, "1", "1Gi")},
		}, want: []string{"large/1"}},
		{name: "nothing left without templates", options: []optionSpec{
			{group: "no-template", nodes: 1, pods: pods(1, "1", "1Gi")},
		}, want: []string{}},
		{name: "ties are kept", options: []optionSpec{
			{group: "medium", nodes: 1, pods: pods(2, "1", "4Gi")},
			{group: "large", nodes: 1, pods: pods(2, "1", "4Gi")},
			{group: "twin", nodes: 1, pods: pods(2, "1", "4Gi")},
		}, want: []string{"medium/1", "twin/1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := leastWaste{}.BestOptions(t.Context(), w.options(t, tc.options), w.nodeInfos)
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("BestOptions (-want +got):\n%s", diff)
			}
		})
	}
}
