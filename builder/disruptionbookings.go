package builder

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	provreqv1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// bookedNodes holds, for the disruption engine, the nodes on which the last
// scale-up step placed capacity booked for a provisioned ProvisioningRequest
// (check-capacity's booking, which lasts after a Provisioned=True answer
// until its pods are scheduled or the booking time has passed, and an
// all-or-nothing request's own booking, wherever it landed). The
// ProvisioningRequest processor books that capacity anew each loop by
// placing the request's pods on the session's snapshot; those pods are
// pinned to no node in the API, so the nodes they landed on are read back
// from the snapshot once the scale-up step is done (ScaleUpDone). Nodes
// keep the booking of the last loop that ran the scale-up step: the engine
// runs before it, so it sees the previous loop's placement, as it sees the
// processor's Holds. A loop that ran no session (no pending pod, no request
// with work) books nothing: the holds are cleared.
type bookedNodes struct {
	mu    sync.Mutex
	holds map[string]string
}

// ScaleUpDone implements processors.ScaleUpStatusProcessor.
func (b *bookedNodes) ScaleUpDone(_ context.Context, _ *processors.Loop, status processors.ScaleUpStatus) {
	holds := map[string]string{}
	if s := status.Session; s != nil {
		holds = bookedHolds(s.Simulator().Snapshot())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holds = holds
}

// bookedHolds are the nodes of snap that hold a request's booked pods,
// with why (bookedOn).
func bookedHolds(snap *framework.Snapshot) map[string]string {
	holds := map[string]string{}
	for _, node := range snap.NodeNames() {
		ni, err := snap.NodeInfo(node)
		if err != nil {
			continue
		}
		var booked []*apiv1.Pod
		for _, pi := range ni.Pods {
			if p := pi.GetPod(); isBookingPod(p) {
				booked = append(booked, p)
			}
		}
		if why := bookedOn(booked); why != "" {
			holds[node] = why
		}
	}
	return holds
}

// isBookingPod is bookingOwner's answer alone.
func isBookingPod(p *apiv1.Pod) bool {
	_, ok := bookingOwner(p)
	return ok
}

// Holding implements holder: whether node holds booked capacity, and for
// which requests.
func (b *bookedNodes) Holding(node string) (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	why, ok := b.holds[node]
	return ok, why
}

// bookedOn says which requests' booked pods are among pods (empty: none):
// "ProvisioningRequest ns/name: capacity booked on the node (class, n
// pods)", one such part per request, sorted.
func bookedOn(pods []*apiv1.Pod) string {
	type key struct{ ns, name, class string }
	counts := map[key]int{}
	for _, p := range pods {
		name, ok := bookingOwner(p)
		if !ok {
			continue
		}
		class, _ := provreq.PodClassName(p)
		counts[key{p.Namespace, name, class}]++
	}
	if len(counts) == 0 {
		return ""
	}
	parts := make([]string, 0, len(counts))
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("ProvisioningRequest %s/%s: capacity booked on the node (%s, %d pods)",
			k.ns, k.name, k.class, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// bookingOwner reports whether p is a pod the ProvisioningRequest
// processor built to book a request's capacity (controlled by the request
// itself: the workload's own pods are controlled by their workload), and
// the request's name.
func bookingOwner(p *apiv1.Pod) (string, bool) {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == provreqv1.Kind &&
			o.APIVersion == provreqv1.SchemeGroupVersion.String() {
			return o.Name, true
		}
	}
	return "", false
}
