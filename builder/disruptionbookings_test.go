package builder

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	provreqv1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
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
