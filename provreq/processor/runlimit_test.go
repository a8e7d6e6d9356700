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

// runLoop runs one loop at now that sees nodes and scheduled pods.
func runLoop(p *Processor, c *cluster, now time.Time, nodes []*apiv1.Node, scheduled []*apiv1.Pod) {
	ctx := context.Background()
	l := p.Begin(ctx, Input{Now: now, ScheduledPods: scheduled})
	l.Run(ctx, c, nodes, c)
	l.Finish(ctx)
}

// An atomic request with maxRunDurationSeconds: the Provisioned event says
// when its capacity is revoked; it is revoked then, even after its booking
// was consumed, and its nodes are released (kept on the list once the
// request is deleted, until they are gone).
func TestMaxRunDurationRevokesAndReleasesTheNodes(t *testing.T) {
	c := &cluster{atomic: scaleup.AtomicResult{Fit: true, Increases: []scaleup.Increase{{NodeGroup: "g", From: 0, To: 2}},
		Instances: map[string][]string{"g": {"i1", "i2"}}}, groups: map[string]GroupView{}}
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 2, map[string]string{"maxRunDurationSeconds": "60"}, t0)
	events := record.NewFakeRecorder(100)
	o := testOptions()
	o.MaxRunGrace = 5 * time.Minute
	p := New(o, c, c, c, c.rollback, WithEventRecorder(events))
	n1 := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n2 := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	nodes := []*apiv1.Node{n1, n2}
	runLoop(p, c, t0, nil, nil)
	if got := p.RunReleases(); len(got) != 0 {
		t.Fatalf("releases %v before the request is provisioned", got)
	}
	c.groups["g"] = view(2, "i1=n1", "i2=n2")
	provisioned := t0.Add(2 * time.Minute)
	runLoop(p, c, provisioned, nodes, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	revokeAt := provisioned.Add(time.Minute)
	want := "The capacity is revoked at " + revokeAt.Format(time.RFC3339) + " (maxRunDurationSeconds=60)."
	if msg := cond(t, pr, provreq.ConditionProvisioned).Message; !strings.Contains(msg, want) {
		t.Errorf("Provisioned message %q does not say %q", msg, want)
	}
	if !drained(events, "ProvisionedCapacityIsProvisioned", want) {
		t.Error("no Provisioned event saying when the capacity is revoked")
	}
	rels := p.RunReleases()
	if len(rels) != 2 || rels["n1"].Revoked || !rels["n1"].RevokeAt.Equal(revokeAt) ||
		!rels["n2"].GraceEnd.Equal(revokeAt.Add(5*time.Minute)) || !rels["n1"].Provisioned.Equal(provisioned) {
		t.Fatalf("releases before the limit: %+v", rels)
	}

	// Its pods run: the booking is consumed, the run limit still counts.
	running := []*apiv1.Pod{consumer("a", true), consumer("a", true)}
	runLoop(p, c, revokeAt.Add(-time.Second), nodes, running)
	wantCond(t, pr, provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed)
	if cond(t, pr, provreq.ConditionCapacityRevoked) != nil {
		t.Fatal("revoked before maxRunDurationSeconds passed")
	}
	records, _, err := (&Loop{p: p, now: revokeAt, requests: []*request{{pr: pr, state: p.states[pr.UID], status: pr.Status}}}).records(nil, nil)
	if err != nil || !strings.Contains(records[string(pr.UID)], "n1") {
		t.Errorf("the record of a consumed request with a run limit lost its nodes: %v, %v", records, err)
	}
	runLoop(p, c, revokeAt, nodes, running)
	wantCond(t, pr, provreq.ConditionCapacityRevoked, metav1.ConditionTrue, ReasonMaxRunDurationExceeded)
	msg := cond(t, pr, provreq.ConditionCapacityRevoked).Message
	for _, part := range []string{"maxRunDurationSeconds=60", revokeAt.Format(time.RFC3339), "n1, n2",
		revokeAt.Add(5 * time.Minute).Format(time.RFC3339)} {
		if !strings.Contains(msg, part) {
			t.Errorf("CapacityRevoked message %q does not name %q", msg, part)
		}
	}
	if !drained(events, "Warning CapacityRevokedMaxRunDurationExceeded", "maxRunDurationSeconds=60") {
		t.Error("no Warning event for the revocation")
	}
	if rels := p.RunReleases(); !rels["n1"].Revoked || !rels["n2"].Revoked {
		t.Fatalf("nodes not released once revoked: %+v", rels)
	}

	// Kueue deletes the request of the workload it evicted: its nodes stay
	// released until they are gone.
	c.requests = nil
	runLoop(p, c, revokeAt.Add(time.Minute), nodes, nil)
	if rels := p.RunReleases(); len(rels) != 2 || !rels["n2"].Revoked {
		t.Fatalf("releases once the request is deleted: %+v", rels)
	}
	runLoop(p, c, revokeAt.Add(2*time.Minute), []*apiv1.Node{n2}, nil)
	if rels := p.RunReleases(); len(rels) != 1 || !rels["n2"].Revoked {
		t.Fatalf("releases once n1 is gone: %+v", rels)
	}
}

// A request deleted before its limit passed releases nothing: only a
// revocation releases nodes.
func TestMaxRunDurationDeletedBeforeTheLimitReleasesNothing(t *testing.T) {
	c := &cluster{atomic: scaleup.AtomicResult{Fit: true, Increases: []scaleup.Increase{{NodeGroup: "g", From: 0, To: 1}},
		Instances: map[string][]string{"g": {"i1"}}}, groups: map[string]GroupView{}}
	c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 1, map[string]string{"maxRunDurationSeconds": "3600"}, t0)
	p := newTestProcessor(c, nil)
	nodes := []*apiv1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	runLoop(p, c, t0, nil, nil)
	c.groups["g"] = view(1, "i1=n1")
	runLoop(p, c, t0.Add(time.Minute), nodes, nil)
	if rels := p.RunReleases(); len(rels) != 1 || rels["n1"].Revoked {
		t.Fatalf("releases of a provisioned request: %+v", rels)
	}
	c.requests = nil
	runLoop(p, c, t0.Add(2*time.Hour), nodes, nil)
	if rels := p.RunReleases(); len(rels) != 0 {
		t.Errorf("a request deleted before its limit left releases %+v", rels)
	}
}

// A check-capacity request is revoked too (Kueue evicts its workload); it
// made no nodes, so none is released.
func TestMaxRunDurationCheckCapacity(t *testing.T) {
	c := &cluster{fits: true}
	pr := c.addRequest("a", provreq.ClassCheckCapacity, 1, map[string]string{"maxRunDurationSeconds": "120"}, t0)
	p := newTestProcessor(c, nil)
	runLoop(p, c, t0, nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	runLoop(p, c, t0.Add(119*time.Second), nil, nil)
	if cond(t, pr, provreq.ConditionCapacityRevoked) != nil {
		t.Fatal("revoked early")
	}
	runLoop(p, c, t0.Add(121*time.Second), nil, nil)
	wantCond(t, pr, provreq.ConditionCapacityRevoked, metav1.ConditionTrue, ReasonMaxRunDurationExceeded)
	if msg := cond(t, pr, provreq.ConditionCapacityRevoked).Message; !strings.Contains(msg, "made no nodes") {
		t.Errorf("message %q", msg)
	}
	if rels := p.RunReleases(); len(rels) != 0 {
		t.Errorf("releases %+v for a request without nodes", rels)
	}
}

// A bad maxRunDurationSeconds fails the request as other bad parameters do.
func TestMaxRunDurationInvalidFails(t *testing.T) {
	for _, v := range []string{"0", "604801", "1h", "-5", ""} {
		c := &cluster{fits: true}
		pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 1, map[string]string{"maxRunDurationSeconds": v}, t0)
		runLoop(newTestProcessor(c, nil), c, t0, nil, nil)
		wantCond(t, pr, provreq.ConditionFailed, metav1.ConditionTrue, ReasonInvalidParameters)
		if msg := cond(t, pr, provreq.ConditionFailed).Message; !strings.Contains(msg, "maxRunDurationSeconds") {
			t.Errorf("%q: message %q does not name the parameter", v, msg)
		}
		if c.scaleCalls != 0 || c.fitCalls != 0 {
			t.Errorf("%q: the request was worked on (%d scale-ups, %d fits)", v, c.scaleCalls, c.fitCalls)
		}
	}
}

// drained reads the recorded events and reports whether one carries both
// parts.
func drained(events *record.FakeRecorder, a, b string) bool {
	found := false
	for {
		select {
		case e := <-events.Events:
			found = found || (strings.Contains(e, a) && strings.Contains(e, b))
			continue
		default:
		}
		return found
	}
}
