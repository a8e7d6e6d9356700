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

// bookingCluster is a registered node group of n identical nodes of cpu
// CPU and 64 Gi, labelled pool=booked, as a ProvisioningRequest's scale-up
// leaves it.
func bookingCluster(n int, cpu string) (*fakeprovider.Provider, []*apiv1.Node) {
	created := metav1.NewTime(time.Now().Add(-time.Hour))
	tmpl := templateNode("booked", cpu)
	tmpl.Labels["pool"] = "booked"
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("booked", 0, 2*n, n, tmpl)
	nodes := make([]*apiv1.Node, n)
	for i := range nodes {
		node := templateNode(fmt.Sprintf("booked-%d", i), cpu)
		node.Labels["pool"] = "booked"
		node.Labels["kubernetes.io/hostname"] = node.Name
		node.CreationTimestamp = created
		nodes[i] = node
		provider.AddNode("booked", node)
	}
	return provider, nodes
}

// requestPods are n pods of one ProvisioningRequest PodSet, built as the
// processor builds them: one owner, one shared spec, labels and a node
// selector.
func requestPods(n int, cpu, memory string) []*apiv1.Pod {
	yes := true
	owner := metav1.OwnerReference{APIVersion: "autoscaling.x-k8s.io/v1", Kind: "ProvisioningRequest", Name: "big",
		UID: "pr-big", Controller: &yes}
	spec := apiv1.PodSpec{NodeSelector: map[string]string{"pool": "booked"},
		Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
			apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse(memory)}}}}}
	labels := map[string]string{"app": "big"}
	annotations := map[string]string{"autoscaling.x-k8s.io/consume-provisioning-request": "big"}
	out := make([]*apiv1.Pod, n)
	for i := range out {
		name := fmt.Sprintf("big-0-%d", i)
		out[i] = &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("pr-big/" + name),
			Labels: labels, Annotations: annotations, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: spec, Status: apiv1.PodStatus{Phase: apiv1.PodPending}}
	}
	return out
}

// BenchmarkBook: the booking of a provisioned request of 40,000 pods (1 CPU,
// 1 Gi) on the 4,000 nodes of 10 CPU its scale-up made, as every loop
// places it until the workload's pods are scheduled: Session.Place (atomic
// requests), Place on registered nodes only and FitAll (check-capacity).
// The session (snapshot load) is made outside the timer.
//
//	go test -run xxx -bench BenchmarkBook -benchtime 3x -benchmem ./scaleup
func BenchmarkBook(b *testing.B) {
	const nodes, pods = 4000, 40000
	provider, nodeList := bookingCluster(nodes, "10")
	booked := [][]*apiv1.Pod{requestPods(pods, "1", "1Gi")}
	ctx := context.Background()
	o := newOrchestrator(b, provider, nil)
	in := Input{Now: time.Now(), Nodes: nodeList}
	if err := o.state.Update(ctx, provider, nodeList, in.Now); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		run  func(s *Session) int // pods left over
	}{
		{name: "Place", run: func(s *Session) int { return len(s.Place(ctx, booked, false)) }},
		{name: "PlaceRealOnly", run: func(s *Session) int { return len(s.Place(ctx, booked, true)) }},
		{name: "FitAll", run: func(s *Session) int {
			if fit, _ := s.FitAll(ctx, booked, true); fit {
				return 0
			}
			return -1
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := o.Begin(ctx, in)
				b.StartTimer()
				if left := bc.run(s); left != 0 {
					b.Fatalf("%d pods left over, want none", left)
				}
			}
		})
	}
}
