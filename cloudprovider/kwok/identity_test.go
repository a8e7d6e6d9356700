package kwok

import (
	"context"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// A Node names its kwok instance as kwok://<name>; the same ID spelt with
// the empty host or an upper-case scheme is the instance for sure, as is a
// placeholder named after the instance. A foreign ID is no instance.
func TestInstanceOfNodeSpellings(t *testing.T) {
	p, g := newTestProvider(t, fake.NewClientset(), oneGroup)
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	listed, err := g.Nodes(ctx)
	if err != nil || len(listed) != 1 {
		t.Fatalf("instances %v, %v; want one", listed, err)
	}
	id := listed[0].Id
	name := strings.TrimPrefix(id, ProviderIDPrefix)
	for _, tc := range []struct {
		node  *apiv1.Node
		found bool
	}{
		{&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apiv1.NodeSpec{ProviderID: id}}, true},
		{&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: apiv1.NodeSpec{ProviderID: "kwok:///" + name}}, true},
		{&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: apiv1.NodeSpec{ProviderID: "KWOK://" + name}}, true},
		{cloudprovider.InstanceNode(id), true},
		{&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "y"}, Spec: apiv1.NodeSpec{ProviderID: "othercloud://" + name + "-other"}}, false},
	} {
		got, found, err := p.InstanceOfNode(ctx, tc.node)
		if err != nil || found != tc.found || (found && got != id) {
			t.Errorf("InstanceOfNode(%s) = %q, %v, %v; want %q, %v", tc.node.Spec.ProviderID, got, found, err, id, tc.found)
		}
	}
}
