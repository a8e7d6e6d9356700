package scaleup

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// BenchmarkScaleUpDecision5000Nodes: one scale-up decision on a cluster of
// 5,000 nodes (32 CPU) running 150,000 pods (30 per node, 100m each), with
// 10,000 pending pods in 10 groups of 1,000: five groups fit the room left on
// existing nodes, five need nodes of a second group (pool=new, 16 CPU). The
// decision includes loading the snapshot, setting aside the pods that fit,
// estimating and choosing.
func BenchmarkScaleUpDecision5000Nodes(b *testing.B) {
	const nodes, podsPerNode = 5000, 30
	created := metav1.NewTime(time.Now().Add(-time.Hour))
	var nodeList []*apiv1.Node
	var scheduled []*apiv1.Pod
	for i := 0; i < nodes; i++ {
		n := templateNode(fmt.Sprintf("node-%d", i), "32")
		n.Labels = map[string]string{"pool": "existing", "kubernetes.io/hostname": n.Name}
		n.CreationTimestamp = created
		nodeList = append(nodeList, n)
		for j := 0; j < podsPerNode; j++ {
			p := pendingPods(1, "100m")[0]
			p.Name = fmt.Sprintf("run-%d-%d", i, j)
			p.UID = types.UID(p.Name)
			p.Spec.NodeName = n.Name
			scheduled = append(scheduled, p)
		}
	}
	var pending []*apiv1.Pod
	for g := 0; g < 10; g++ {
		for i, p := range pendingPods(1000, "1") {
			p.Name = fmt.Sprintf("pending-%d-%d", g, i)
			p.UID = types.UID(p.Name)
			p.OwnerReferences[0].UID = types.UID(fmt.Sprintf("rs-%d", g))
			if g%2 == 1 {
				p.Spec.NodeSelector = map[string]string{"pool": "new"}
			}
			p.Spec.Containers[0].Resources.Requests[apiv1.ResourceMemory] = resource.MustParse("1Gi")
			pending = append(pending, p)
		}
	}
	newTemplate := templateNode("new", "16")
	newTemplate.Labels["pool"] = "new"
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		provider := fakeprovider.NewProvider()
		provider.AddNodeGroup("existing", 0, 10000, nodes, nodeList[0])
		for _, n := range nodeList {
			provider.AddNode("existing", n)
		}
		provider.AddNodeGroup("new", 0, 2000, 0, newTemplate)
		o := newOrchestrator(b, provider, nil)
		b.StartTimer()
		res, err := runLoop(ctx, o, Input{Now: time.Now(), Nodes: nodeList, ScheduledPods: scheduled, Pending: pending})
		if err != nil {
			b.Fatal(err)
		}
		if res.FitExisting != 5000 || increases(res)["new"] == 0 {
			b.Fatalf("fitExisting %d, increases %v", res.FitExisting, increases(res))
		}
	}
}
