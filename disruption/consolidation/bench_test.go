package consolidation

import (
	"context"
	"fmt"
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

// benchCluster is n nodes in the three groups (40% small, 35% medium, 25%
// large), each running 1-cpu pods on 40% of its cpu, of 20 Deployments of
// which the even ones have a PDB allowing one disruption.
func benchCluster(n int) *cluster {
	c := &cluster{groups: threeGroups}
	counts := []int{n * 40 / 100, n * 35 / 100}
	counts = append(counts, n-counts[0]-counts[1])
	cores := []int{4, 8, 16}
	// The pods of one Deployment share their containers and labels, as
	// the informer cache has them (informercache), so the simulation's
	// CheckMemo lends one PreFilter result to all of them.
	shared := map[string]*apiv1.Pod{}
	pod := 0
	for gi, g := range threeGroups {
		for i := 0; i < counts[gi]; i++ {
			name := fmt.Sprintf("%s-%03d", g.id, i)
			c.node(name, g.id)
			for k := 0; k < cores[gi]*40/100; k++ {
				app := fmt.Sprintf("app-%02d", pod%20)
				pname := fmt.Sprintf("p-%05d", pod)
				if first, ok := shared[app]; ok {
					cp := *first
					cp.Name, cp.UID, cp.Spec.NodeName = pname, testbuild.UID(pname), name
					c.pods = append(c.pods, &cp)
				} else {
					shared[app] = c.pod(pname, app, "1", name).Obj()
				}
				pod++
			}
		}
	}
	for i := 0; i < 20; i += 2 {
		c.pdb(fmt.Sprintf("app-%02d", i), 1)
	}
	return c
}

// BenchmarkPlan200: one plan over 200 nodes in three groups at 40%.
func BenchmarkPlan200(b *testing.B) {
	h := newHandle(b)
	c := benchCluster(200)
	in := c.input(h)
	p := NewPlanner(DefaultOptions())
	var res Result
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res = p.PlanDetailed(context.Background(), in)
	}
	b.StopTimer()
	nodes, replaced := 0, 0
	saving := 0.0
	for _, cand := range res.Candidates {
		nodes += len(cand.Nodes)
		if len(cand.Replacement) > 0 {
			replaced++
		}
		saving += cand.SavingPerHour
	}
	b.ReportMetric(float64(nodes), "nodes/plan")
	b.ReportMetric(float64(replaced), "replacements/plan")
	b.ReportMetric(float64(res.Simulations), "simulations/plan")
	b.ReportMetric(saving, "saving/h")
}

// BenchmarkPlan200Replace: 100 small and 100 medium nodes at 75% and an
// empty large group, cheapest per core: after the delete-only removals,
// the replacements by large nodes save the most.
func BenchmarkPlan200Replace(b *testing.B) {
	h := newHandle(b)
	c := &cluster{groups: threeGroups}
	pod := 0
	for gi, g := range threeGroups[:2] {
		for i := 0; i < 100; i++ {
			name := fmt.Sprintf("%s-%03d", g.id, i)
			c.node(name, g.id)
			for k := 0; k < 3*(gi+1); k++ {
				c.pod(fmt.Sprintf("p-%05d", pod), fmt.Sprintf("app-%02d", pod%20), "1", name)
				pod++
			}
		}
	}
	in := c.input(h)
	p := NewPlanner(DefaultOptions())
	var res Result
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res = p.PlanDetailed(context.Background(), in)
	}
	b.StopTimer()
	replaced, saving := 0, 0.0
	for _, cand := range res.Candidates {
		if len(cand.Replacement) > 0 {
			replaced += len(cand.Nodes)
		}
		saving += cand.SavingPerHour
	}
	b.ReportMetric(float64(len(res.Candidates)), "candidates/plan")
	b.ReportMetric(float64(replaced), "replaced-nodes/plan")
	b.ReportMetric(float64(res.Simulations), "simulations/plan")
	b.ReportMetric(saving, "saving/h")
}
