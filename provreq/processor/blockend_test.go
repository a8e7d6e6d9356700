package processor

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// A provisioned atomic request whose node enters an ending Capacity
// Block's drain window is CapacityRevoked (CapacityBlockEnding), its
// booking consumed or not; a request on other nodes is not.
func TestEndingCapacityBlockRevokesTheRequestsOnIt(t *testing.T) {
	for _, consumed := range []bool{false, true} {
		c := &cluster{atomic: scaleup.AtomicResult{Fit: true, Increases: []scaleup.Increase{{NodeGroup: "g", From: 0, To: 2}},
			Instances: map[string][]string{"g": {"i1", "i2"}}}, groups: map[string]GroupView{}}
		pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 2, nil, t0)
		events := record.NewFakeRecorder(100)
		ending := map[string]EndingCapacity{}
		end := t0.Add(time.Hour)
		p := New(testOptions(), c, c, c, c.rollback, WithEventRecorder(events),
			WithEndingCapacity(func() map[string]EndingCapacity { return ending }))
		nodes := []*apiv1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}
		runLoop(p, c, t0, nil, nil)
		c.groups["g"] = view(2, "i1=n1", "i2=n2")
		runLoop(p, c, t0.Add(time.Minute), nodes, nil)
		wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
		var running []*apiv1.Pod
		if consumed {
			running = []*apiv1.Pod{consumer("a", true), consumer("a", true)}
			runLoop(p, c, t0.Add(2*time.Minute), nodes, running)
			wantCond(t, pr, provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed)
		}
		// Another node's block ends: not this request's.
		ending["other"] = EndingCapacity{ID: "cr-other", End: end}
		runLoop(p, c, t0.Add(3*time.Minute), nodes, running)
		if got := cond(t, pr, provreq.ConditionCapacityRevoked); got != nil {
			t.Fatalf("consumed=%v: revoked by another node's block: %+v", consumed, got)
		}
		ending["n2"] = EndingCapacity{ID: "cr-block", End: end}
		runLoop(p, c, t0.Add(4*time.Minute), nodes, running)
		wantCond(t, pr, provreq.ConditionCapacityRevoked, metav1.ConditionTrue, ReasonCapacityBlockEnding)
		msg := cond(t, pr, provreq.ConditionCapacityRevoked).Message
		for _, part := range []string{"cr-block", end.Format(time.RFC3339), "n2"} {
			if !strings.Contains(msg, part) {
				t.Errorf("consumed=%v: CapacityRevoked message %q does not name %q", consumed, msg, part)
			}
		}
		if strings.Contains(msg, "cr-other") || strings.Contains(msg, "n1") {
			t.Errorf("consumed=%v: CapacityRevoked message %q names what is not the request's ending capacity", consumed, msg)
		}
		if !drained(events, "Warning CapacityRevokedCapacityBlockEnding", "cr-block") {
			t.Errorf("consumed=%v: no Warning event for the revocation", consumed)
		}
	}
}

// Without WithEndingCapacity nothing is revoked for it, and a request not
// provisioned yet is never revoked.
func TestEndingCapacityNeedsAProvisionedRequest(t *testing.T) {
	c := &cluster{atomic: scaleup.AtomicResult{Fit: false}, groups: map[string]GroupView{}}
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 1, nil, t0)
	p := New(testOptions(), c, c, c, c.rollback,
		WithEndingCapacity(func() map[string]EndingCapacity { return map[string]EndingCapacity{"n1": {ID: "cr", End: t0}} }))
	runLoop(p, c, t0, []*apiv1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, nil)
	if got := cond(t, pr, provreq.ConditionCapacityRevoked); got != nil {
		t.Fatalf("a request not provisioned was revoked: %+v", got)
	}
}

// placingCluster is a cluster whose Place also names the nodes it placed
// the pods on (as scaleup.Session's PlaceOn does).
type placingCluster struct {
	*cluster
	on []string
}

func (pc *placingCluster) PlaceOn(ctx context.Context, sets [][]*apiv1.Pod, realOnly bool) ([]*apiv1.Pod, []string) {
	return pc.Place(ctx, sets, realOnly), pc.on
}

// A check-capacity request keeps no nodes of its own: its booking, placed
// anew each loop, is revoked (the block named) once the loop books it on a
// node whose reserved capacity ends soon.
func TestEndingCapacityRevokesACheckCapacityBookingOnIt(t *testing.T) {
	c := &cluster{fits: true, groups: map[string]GroupView{}}
	pc := &placingCluster{cluster: c, on: []string{"n1"}}
	pr := c.addRequest("cc", provreq.ClassCheckCapacity, 2, nil, t0)
	ending := map[string]EndingCapacity{}
	end := t0.Add(time.Hour)
	p := New(testOptions(), c, c, c, c.rollback, WithEndingCapacity(func() map[string]EndingCapacity { return ending }))
	nodes := []*apiv1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}
	run := func(now time.Time) {
		ctx := context.Background()
		l := p.Begin(ctx, Input{Now: now})
		l.Run(ctx, pc, nodes, c)
		l.Finish(ctx)
	}
	run(t0)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	ending["n2"] = EndingCapacity{ID: "cr-other", End: end}
	run(t0.Add(time.Minute))
	if got := cond(t, pr, provreq.ConditionCapacityRevoked); got != nil {
		t.Fatalf("revoked by a block its booking is not on: %+v", got)
	}
	// The block's drain has cordoned n1 by the time the loop places the
	// booking again, elsewhere: the last loop's booking was on it.
	ending["n1"] = EndingCapacity{ID: "cr-block", End: end}
	pc.on = []string{"n2b"}
	run(t0.Add(2 * time.Minute))
	wantCond(t, pr, provreq.ConditionCapacityRevoked, metav1.ConditionTrue, ReasonCapacityBlockEnding)
	if msg := cond(t, pr, provreq.ConditionCapacityRevoked).Message; !strings.Contains(msg, "cr-block") || !strings.Contains(msg, "n1") {
		t.Errorf("CapacityRevoked message %q does not name the block and the node", msg)
	}
}
