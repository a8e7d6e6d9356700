package processor

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

// TestBookedPodsAreBuiltOnce: a provisioned request's pods are built in the
// first loop and reused by the next ones while neither the request nor its
// templates change; a changed template rebuilds them from it, and a request
// whose booking is over lets them go.
func TestBookedPodsAreBuiltOnce(t *testing.T) {
	c := &cluster{fits: true}
	pr := c.addRequest("a", provreq.ClassCheckCapacity, 3, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil) // provisioned: the capacity fits
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	loop(p, c, t0.Add(time.Second), nil, nil)
	first := c.lastPlaced
	if len(first) != 1 || len(first[0]) != 3 {
		t.Fatalf("booked %v, want one PodSet of 3 pods", first)
	}
	loop(p, c, t0.Add(2*time.Second), nil, nil)
	if c.lastPlaced[0][0] != first[0][0] {
		t.Error("the pods were built again, with the request and its template unchanged")
	}
	// One consumer scheduled: the first 2 pods are booked, from the same set.
	loop(p, c, t0.Add(3*time.Second), []*apiv1.Pod{consumer("a", true)}, nil)
	if got := c.lastPlaced; len(got) != 1 || len(got[0]) != 2 || got[0][0] != first[0][0] {
		t.Errorf("booked %v with one consumer scheduled, want the first 2 pods of the set", got)
	}

	tmpl := c.templates["ns/ppt-a"]
	tmpl.ResourceVersion = "2"
	tmpl.Template.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = resource.MustParse("2")
	loop(p, c, t0.Add(4*time.Second), nil, nil)
	got := c.lastPlaced[0][0]
	if got == first[0][0] {
		t.Fatal("the pods were not rebuilt after their template changed")
	}
	if cpu := got.Spec.Containers[0].Resources.Requests.Cpu().String(); cpu != "2" {
		t.Errorf("rebuilt pod requests cpu %s, want 2 from the new template", cpu)
	}

	loop(p, c, t0.Add(11*time.Minute), nil, nil) // the booking time is over
	wantCond(t, pr, provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityReservationTimeExpired)
	loop(p, c, t0.Add(12*time.Minute), nil, nil)
	if st := p.states[pr.UID]; st == nil || st.built != nil {
		t.Errorf("state %+v: the pods of a request whose booking is over are still kept", st)
	}
}
