package builder

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	provreqv1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// bookingPod is a pod as the ProvisioningRequest processor builds it to
// book request ns/name's capacity.
func bookingPod(ns, name, class string) *apiv1.Pod {
	yes := true
	return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-0-0",
		Annotations: map[string]string{provreq.ConsumeAnnotation: name, provreq.ClassAnnotation: class},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: provreqv1.SchemeGroupVersion.String(), Kind: provreqv1.Kind,
			Name: name, Controller: &yes}}}}
}

// TestBookedOn: only the pods a request's booking placed count (the
// workload's own consuming pods, controlled by their ReplicaSet, do not),
// and every request booking on the node is named, with its class and pods.
func TestBookedOn(t *testing.T) {
	yes := true
	consumer := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1",
		Annotations:     map[string]string{provreq.ConsumeAnnotation: "req"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: &yes}}}}
	plain := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	for _, tc := range []struct {
		name string
		pods []*apiv1.Pod
		want string
	}{
		{"none", []*apiv1.Pod{plain, consumer}, ""},
		{"one request", []*apiv1.Pod{plain, bookingPod("ns", "req", provreq.ClassCheckCapacity),
			bookingPod("ns", "req", provreq.ClassCheckCapacity)},
			"ProvisioningRequest ns/req: capacity booked on the node (" + provreq.ClassCheckCapacity + ", 2 pods)"},
		{"two requests", []*apiv1.Pod{bookingPod("b", "r2", provreq.ClassCheckCapacity),
			bookingPod("a", "r1", provreq.ClassBestEffortAtomicScaleUp)},
			"ProvisioningRequest a/r1: capacity booked on the node (" + provreq.ClassBestEffortAtomicScaleUp + ", 1 pods); " +
				"ProvisioningRequest b/r2: capacity booked on the node (" + provreq.ClassCheckCapacity + ", 1 pods)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bookedOn(tc.pods); got != tc.want {
				t.Errorf("bookedOn = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBookedNodesClearedWithoutASession: a loop that ran no scale-up
// session booked nothing, so the nodes an earlier loop held are free.
func TestBookedNodesClearedWithoutASession(t *testing.T) {
	b := &bookedNodes{holds: map[string]string{"n1": "ProvisioningRequest ns/req: capacity booked on the node"}}
	if ok, why := b.Holding("n1"); !ok || why == "" {
		t.Fatalf("Holding(n1) = %v, %q before the loop", ok, why)
	}
	b.ScaleUpDone(context.Background(), &processors.Loop{}, processors.ScaleUpStatus{})
	if ok, _ := b.Holding("n1"); ok {
		t.Error("n1 still held after a loop without a session")
	}
}

// TestBookedNodesProtectTheEngineAndConsolidation: with
// ProvisioningRequests on and a voluntary reason (or consolidation), the
// booked nodes are among the holders of the engine's Protected hook (and so
// of the consolidation planner's, which takes the same holders); with
// ProvisioningRequests off, or healing alone, nothing scans the bookings.
func TestBookedNodesProtectTheEngineAndConsolidation(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		provreqs, consolidates bool
		sources                int
		want                   bool
	}{
		{"consolidation", true, true, 0, true},
		{"a voluntary source", true, false, 1, true},
		{"requests off", false, true, 1, false},
		{"healing alone", true, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := config.Defaults()
			opts.NodeHealingEnabled = true
			opts.EnableProvisioningRequests = tc.provreqs
			opts.Disruption.ConsolidationEnabled = tc.consolidates
			var sources []disruption.Source
			for i := 0; i < tc.sources; i++ {
				sources = append(sources, noSource{})
			}
			in := Inputs{Opts: opts, Client: fake.NewSimpleClientset(), Provider: cpfake.NewProvider(),
				Recorder: record.NewFakeRecorder(1), Metrics: metrics.New(prometheus.NewRegistry()),
				Disruption: DisruptionInputs{Sources: sources}}
			var procs processors.Set
			if _, err := addDisruption(context.Background(), opts, in, &procs, nil, nil); err != nil {
				t.Fatal(err)
			}
			var found *bookedNodes
			for _, h := range bookingHolders(procs) {
				if b, ok := h.(*bookedNodes); ok {
					found = b
				}
			}
			if (found != nil) != tc.want {
				t.Fatalf("booked nodes among the holders: %v, want %v", found != nil, tc.want)
			}
			if found == nil {
				return
			}
			found.holds = map[string]string{"n1": "ProvisioningRequest ns/req: capacity booked on the node"}
			if ok, why := protections(nil, bookingHolders(procs)...)("n1"); !ok || why != found.holds["n1"] {
				t.Errorf("Protected(n1) = %v, %q; want the booking named", ok, why)
			}
		})
	}
}

// snapshotWithBookings is a snapshot of nodes nodes of podsPerNode
// ordinary pods each, with two pods of check-capacity request ns/req booked
// on node n-1.
func snapshotWithBookings(t testing.TB, nodes, podsPerNode int) *framework.Snapshot {
	t.Helper()
	var ns []*apiv1.Node
	var pods []*apiv1.Pod
	for i := range nodes {
		name := fmt.Sprintf("n-%d", i)
		ns = append(ns, &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		for j := range podsPerNode {
			yes := true
			pods = append(pods, &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p-%d-%d", i, j),
				UID:             types.UID(fmt.Sprintf("p-%d-%d", i, j)),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: &yes}}},
				Spec: apiv1.PodSpec{NodeName: name}})
		}
	}
	snap := framework.NewSnapshot(ns, pods)
	for i := range 2 {
		p := bookingPod("ns", "req", provreq.ClassCheckCapacity)
		p.Name, p.UID = fmt.Sprintf("req-0-%d", i), types.UID(fmt.Sprintf("req-0-%d", i))
		if err := snap.AddPod(p, "n-1"); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

// TestBookedHoldsReadTheSnapshot: the booked pods the processor placed on
// a node of the loop's snapshot hold that node, and only that one.
func TestBookedHoldsReadTheSnapshot(t *testing.T) {
	got := bookedHolds(snapshotWithBookings(t, 3, 2))
	want := map[string]string{"n-1": "ProvisioningRequest ns/req: capacity booked on the node (" + provreq.ClassCheckCapacity + ", 2 pods)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("holds (-want +got):\n%s", diff)
	}
}

// BenchmarkBookedHolds: the scan each loop adds when ProvisioningRequests
// and a voluntary reason are on, over 5000 nodes of 30 pods.
func BenchmarkBookedHolds(b *testing.B) {
	snap := snapshotWithBookings(b, 5000, 30)
	b.ResetTimer()
	for range b.N {
		if len(bookedHolds(snap)) != 1 {
			b.Fatal("want one node held")
		}
	}
}
