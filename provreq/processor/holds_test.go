package processor

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

func nodesNamed(names ...string) []*apiv1.Node {
	var out []*apiv1.Node
	for _, n := range names {
		out = append(out, &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return out
}

func heldNodes(t *testing.T, p *Processor) []string {
	t.Helper()
	holds, known := p.Holds()
	if !known {
		t.Fatal("holds unknown after a loop")
	}
	if len(holds) == 0 {
		return nil
	}
	return sortedKeys(holds)
}

// An all-or-nothing request holds the registered nodes of its attempt in
// flight, then its provisioned nodes while its booking lasts, and nothing
// once the booking is over; before any loop, every node counts as held.
func TestHoldsFollowAnAtomicRequest(t *testing.T) {
	c := atomicCluster(2, "i1", "i2")
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	p := newTestProcessor(c, nil)
	if held, why := p.Holding("old"); !held || why == "" {
		t.Errorf("before any loop: held %v (%q), want held with a reason", held, why)
	}
	run := func(now time.Time, nodes ...string) {
		ctx := context.Background()
		l := p.Begin(ctx, Input{Now: now})
		l.Run(ctx, c, nodesNamed(nodes...), c)
		l.Finish(ctx)
	}
	run(t0, "old")
	if got := heldNodes(t, p); got != nil {
		t.Errorf("just scaled up (nothing registered): held %v, want none", got)
	}
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2")
	run(t0.Add(time.Minute), "old", "n1")
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	if diff := cmp.Diff([]string{"n1"}, heldNodes(t, p)); diff != "" {
		t.Errorf("attempt in flight: held nodes (-want +got):\n%s", diff)
	}
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2=n2")
	run(t0.Add(2*time.Minute), "old", "n1", "n2")
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	run(t0.Add(3*time.Minute), "old", "n1", "n2")
	if diff := cmp.Diff([]string{"n1", "n2"}, heldNodes(t, p)); diff != "" {
		t.Errorf("provisioned: held nodes (-want +got):\n%s", diff)
	}
	if held, _ := p.Holding("old"); held {
		t.Error("the group's old node is held; it is not the request's")
	}
	// The booking time (10m) passes: the request no longer holds them.
	run(t0.Add(20*time.Minute), "old", "n1", "n2")
	wantCond(t, pr, provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityReservationTimeExpired)
	if got := heldNodes(t, p); got != nil {
		t.Errorf("booking expired: held %v, want none", got)
	}
}
