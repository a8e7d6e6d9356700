package fake

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

func node(name string) *apiv1.Node { return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func TestSizeRules(t *testing.T) {
	ctx := context.Background()
	p := NewProvider()
	g := p.AddNodeGroup("ng", 2, 4, 2, nil)
	n1, n2 := node("n1"), node("n2")
	p.AddNode("ng", n1)
	p.AddNode("ng", n2)

	if err := g.IncreaseSize(ctx, 3); err == nil {
		t.Error("increase beyond max accepted")
	}
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := g.DecreaseTargetSize(ctx, -3); err == nil {
		t.Error("decrease beyond the creating instances accepted: it would delete a registered node")
	}
	if err := g.DecreaseTargetSize(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if err := g.DeleteNodes(ctx, []*apiv1.Node{n1, n2}); err == nil {
		t.Error("delete below min accepted")
	}
	if err := g.ForceDeleteNodes(ctx, []*apiv1.Node{n1, n2}); err != nil {
		t.Errorf("force delete refused: %v", err)
	}
	if err := g.DeleteNodes(ctx, []*apiv1.Node{node("stranger")}); err == nil {
		t.Error("deleting a node of another group accepted")
	}
	if size, _ := g.TargetSize(ctx); size != 1 {
		t.Errorf("target = %d, want 1 (2 + 2 - 1 - 2)", size)
	}
	instances, _ := g.Nodes(ctx)
	if len(instances) != 1 || instances[0].Status.State != cloudprovider.InstanceCreating {
		t.Errorf("instances = %+v, want one still creating", instances)
	}
}

func TestCallsAndInjectedErrors(t *testing.T) {
	ctx := context.Background()
	p := NewProvider()
	a := p.AddNodeGroup("a", 0, 10, 0, nil)
	b := p.AddNodeGroup("b", 0, 10, 0, nil)
	boom := errors.New("boom")
	p.InjectError("IncreaseSize", "a", boom)
	if err := a.IncreaseSize(ctx, 1); !errors.Is(err, boom) {
		t.Errorf("a: %v, want boom", err)
	}
	if err := b.IncreaseSize(ctx, 1); err != nil {
		t.Errorf("b: %v", err)
	}
	p.InjectError("AtomicIncreaseSize", "", cloudprovider.ErrNotImplemented)
	if err := b.AtomicIncreaseSize(ctx, 1); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("atomic: %v", err)
	}
	want := []Call{{Method: "IncreaseSize", Group: "a", Delta: 1}, {Method: "IncreaseSize", Group: "b", Delta: 1},
		{Method: "AtomicIncreaseSize", Group: "b", Delta: 1}}
	if diff := cmp.Diff(want, p.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestNodeGroupForNodeAndTemplate(t *testing.T) {
	ctx := context.Background()
	p := NewProvider()
	g := p.AddNodeGroup("ng", 0, 3, 1, node("template"))
	n := node("n")
	p.AddNode("ng", n)
	if got, _ := p.NodeGroupForNode(ctx, n); got == nil || got.Id() != "ng" {
		t.Errorf("NodeGroupForNode = %v", got)
	}
	other := node("other")
	other.Spec.ProviderID = "elsewhere://x"
	if got, _ := p.NodeGroupForNode(ctx, other); got != nil {
		t.Errorf("unmanaged node mapped to %s", got.Id())
	}
	tmpl, err := g.TemplateNodeInfo(ctx)
	if err != nil || tmpl.Node.Name != "template" {
		t.Errorf("template = %v, %v", tmpl, err)
	}
	if _, err := p.AddNodeGroup("bare", 0, 1, 0, nil).TemplateNodeInfo(ctx); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("template without one: %v", err)
	}
}
