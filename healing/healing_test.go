package healing

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// TestNewHeals: the engine New returns heals, as the Healer did, without
// the caller turning healing on.
func TestNewHeals(t *testing.T) {
	client, provider := fake.NewSimpleClientset(), cpfake.NewProvider()
	provider.AddNodeGroup("g", 0, 5, 2, nil)
	var nodes []*apiv1.Node
	for _, n := range []*apiv1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "sick", Annotations: map[string]string{Annotation: "disk"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ok"}},
	} {
		n.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}
		provider.AddNode("g", n)
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	h := New(Options{MaxConcurrent: 1, MaxUnhealthyPercent: 40, ReplaceFirst: true, MaxNodeProvisionTime: time.Minute,
		MaxPodEvictionTime: time.Minute, Namespace: "kube-system"}, client, provider, record.NewFakeRecorder(10), nil)
	h.Repair(context.Background(), &processors.Loop{Now: time.Now(), Nodes: nodes})
	n, err := client.CoreV1().Nodes().Get(context.Background(), "sick", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable {
		t.Error("the annotated node was not cordoned for its heal")
	}
}
