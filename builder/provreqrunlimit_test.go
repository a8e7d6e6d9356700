package builder

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/lifecycle"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// TestExplainerSaysWhenARunLimitedNodeIsReleased: a node of a request whose
// run limit is ahead is told when it will be released; a revoked one
// without the request's pods starts, with no replacement; a node of no
// request gets no verdict for the reason.
func TestExplainerSaysWhenARunLimitedNodeIsReleased(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	provider := cpfake.NewProvider()
	provider.AddNodeGroup("a", 0, 10, 3, nil)
	var nodes []*apiv1.Node
	for _, name := range []string{"ahead", "revoked", "other"} {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		provider.AddNode("a", n)
		nodes = append(nodes, n)
	}
	provisioned := now.Add(-30 * time.Minute)
	at := now.Add(10 * time.Minute)
	rels := map[string]lifecycle.RunRelease{
		"ahead": {Namespace: "ns", Name: "later", Provisioned: provisioned, RevokeAt: at, GraceEnd: at.Add(10 * time.Minute)},
		"revoked": {Namespace: "ns", Name: "done", Provisioned: provisioned, RevokeAt: now.Add(-time.Minute),
			GraceEnd: now.Add(9 * time.Minute), Revoked: true},
	}
	rec := explain.NewRecorder()
	x := &disruptionExplainer{rec: rec, provider: provider, budget: disruption.DefaultBudget{},
		sources: []disruption.Source{lifecycle.NewRunLimit(func() map[string]lifecycle.RunRelease { return rels })}}
	rec.BeginLoop(now)
	explainRepair{x}.Repair(context.Background(), &processors.Loop{Now: now, Nodes: nodes})
	rec.EndLoop()

	v, _, _, ok := rec.Node("ahead")
	if !ok || len(v.Disruptions) != 1 || v.Disruptions[0].Decision != explain.DecisionNo ||
		!strings.Contains(v.Disruptions[0].Why, "passes at "+at.Format(time.RFC3339)) ||
		!strings.Contains(v.Disruptions[0].Why, "ns/later") {
		t.Errorf("ahead: %+v", v.Disruptions)
	}
	v, _, _, ok = rec.Node("revoked")
	if !ok || len(v.Disruptions) != 1 || v.Disruptions[0].Decision != explain.DecisionStarts ||
		v.Disruptions[0].Replacement != "none" || v.Disruptions[0].Reason != string(disruption.MaxRunDuration) {
		t.Errorf("revoked: %+v", v.Disruptions)
	}
	if v, _, _, ok = rec.Node("other"); ok && len(v.Disruptions) != 0 {
		t.Errorf("other: %+v, want no run-limit verdict", v.Disruptions)
	}
}
