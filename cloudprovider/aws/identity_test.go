package aws

import (
	"context"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// A Node names its instance as aws:///<zone>/<id> or aws://<zone>/<id>
// (both are seen in real clusters); either is the listed instance for
// sure, so no destroying path takes the instance for one without a Node.
// A Node of another cloud, or of an instance no group lists, is none.
func TestInstanceOfNodeAcceptsBothSpellings(t *testing.T) {
	s := startFake(t)
	s.AddGroup(awsfake.Group{Name: "ng", Min: 0, Max: 5, Desired: 2, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"}})
	p := newTestProvider(t, []string{"0:5:ng"}, nil)
	refreshUntil(t, p, "running instances", func() bool { r, _, _ := states(group(t, p, "ng").instances); return r == 2 })
	ctx := context.Background()
	listed := group(t, p, "ng").instances
	first, second := listed[0].Id, listed[1].Id
	if !strings.HasPrefix(first, "aws:///") {
		t.Fatalf("listed id %q, want aws:///<zone>/<id>", first)
	}
	withHost := "aws://" + strings.TrimPrefix(first, "aws:///")
	nodes := []*apiv1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: apiv1.NodeSpec{ProviderID: withHost}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: apiv1.NodeSpec{ProviderID: second}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: apiv1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0000000000000dead"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: apiv1.NodeSpec{ProviderID: "gce://p/z/n"}},
	}
	for _, tc := range []struct {
		node  *apiv1.Node
		id    string
		found bool
	}{{nodes[0], first, true}, {nodes[1], second, true}, {nodes[2], "", false}, {nodes[3], "", false}} {
		id, found, err := p.InstanceOfNode(ctx, tc.node)
		if err != nil || id != tc.id || found != tc.found {
			t.Errorf("InstanceOfNode(%s) = %q, %v, %v; want %q, %v", tc.node.Spec.ProviderID, id, found, err, tc.id, tc.found)
		}
	}
	ids := cloudprovider.Identify(ctx, p, nodes, map[string][]cloudprovider.Instance{"ng": listed})
	for instance, node := range map[string]string{first: "a", second: "b"} {
		if n, m := ids.NodeOf(instance); n != node || m != cloudprovider.SureMatch {
			t.Errorf("NodeOf(%s) = %q, %v; want %s for sure", instance, n, m, node)
		}
	}
}
