package estimator

import (
	"context"
	"fmt"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// benchGroups returns groups×perGroup pods of distinct owners and sizes
// (100m..3200m cpu).
func benchGroups(groups, perGroup int) []*apiv1.Pod {
	var out []*apiv1.Pod
	for g := 0; g < groups; g++ {
		out = append(out, pods(fmt.Sprintf("g%d", g), perGroup, fmt.Sprintf("%dm", 100*(g+1)))...)
	}
	return out
}

func benchTemplates() []*cloudprovider.NodeInfo {
	return []*cloudprovider.NodeInfo{templateInfo("4"), templateInfo("16"), templateInfo("64")}
}

// BenchmarkGroupPods100k: equivalence grouping of 100,000 pods of one ReplicaSet.
func BenchmarkGroupPods100k(b *testing.B) {
	ps := pods("a", 100_000, "100m")
	b.ResetTimer()
	for b.Loop() {
		if g := GroupPods(ps); len(g) != 1 {
			b.Fatalf("%d groups", len(g))
		}
	}
}

// BenchmarkEstimate100kIdentical: one group of 100,000 identical pods on a 16-CPU template.
func BenchmarkEstimate100kIdentical(b *testing.B) {
	groups := GroupPods(pods("a", 100_000, "100m"))
	sim := newSim(b)
	e := New(sim)
	tmpl := templateInfo("16")
	b.ResetTimer()
	for b.Loop() {
		est, err := e.Estimate(context.Background(), groups, tmpl, "ng", Limits{MaxNodes: 100_000})
		if err != nil || len(est.Scheduled) != 100_000 {
			b.Fatalf("scheduled %d, %v", len(est.Scheduled), err)
		}
	}
}

// BenchmarkEstimate32x16384x3Templates: 32 groups of 16,384 pods each,
// estimated against three node-group templates (4, 16 and 64 CPU), as a
// scale-up compares its options.
func BenchmarkEstimate32x16384x3Templates(b *testing.B) {
	groups := GroupPods(benchGroups(32, benchPerGroup))
	sim := newSim(b)
	e := New(sim)
	templates := benchTemplates()
	b.ResetTimer()
	for b.Loop() {
		for i, tmpl := range templates {
			est, err := e.Estimate(context.Background(), groups, tmpl, fmt.Sprintf("ng%d", i), Limits{MaxNodes: 1_000_000})
			if err != nil || est.NodeCount == 0 {
				b.Fatalf("template %d: %d nodes, %v", i, est.NodeCount, err)
			}
		}
	}
}

// benchPerGroup is the 16,384 pods per group.
const benchPerGroup = 16384
