package processor

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

// TestWrittenStatusStandsUntilTheInformerSeesIt: a request provisioned in
// one loop, whose status write the informer has not delivered by the next
// loop (a loaded API server), is not decided again from the stale status:
// no second check, no second write, no transition. Once the written status
// differed from the informer's for longer than staleStatusLimit, the
// informer's counts (a status reset by hand is honoured).
func TestWrittenStatusStandsUntilTheInformerSeesIt(t *testing.T) {
	c := &cluster{fits: true, staleCache: true}
	pr := c.addRequest("a", provreq.ClassCheckCapacity, 2, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0.Add(time.Second), nil, nil)
	written := c.written["ns/a"]
	if got := provreq.FindCondition(written.Conditions, provreq.ConditionProvisioned); got == nil ||
		got.Status != metav1.ConditionTrue || got.Reason != provreq.ReasonCapacityIsFound {
		t.Fatalf("first loop wrote Provisioned %+v, want True/%s", got, provreq.ReasonCapacityIsFound)
	}
	if c.fitCalls != 1 || c.writes != 1 {
		t.Fatalf("first loop: %d checks, %d writes; want 1 and 1", c.fitCalls, c.writes)
	}
	// The informer still shows no condition.
	if len(pr.Status.Conditions) != 0 {
		t.Fatal("the fake informer saw the write")
	}
	l := loop(p, c, t0.Add(2*time.Second), nil, nil)
	if c.fitCalls != 1 || c.writes != 1 {
		t.Errorf("second loop over the stale informer: %d checks, %d writes in all; want 1 and 1 (provisioned, nothing to decide)",
			c.fitCalls, c.writes)
	}
	for _, r := range l.requests {
		if len(r.events) != 0 {
			t.Errorf("second loop: transitions %+v, want none", r.events)
		}
	}
	// The informer catches up: it shows what was written; nothing changes.
	pr.Status = *written.DeepCopy()
	loop(p, c, t0.Add(3*time.Second), nil, nil)
	if c.writes != 1 || c.fitCalls != 1 {
		t.Errorf("after the informer caught up: %d writes, %d checks; want 1 and 1", c.writes, c.fitCalls)
	}

	// A status that differs from the written one for longer than the
	// limit counts: reset by hand, the request is decided again.
	c2 := &cluster{fits: true, staleCache: true}
	c2.addRequest("b", provreq.ClassCheckCapacity, 2, nil, t0)
	p2 := newTestProcessor(c2, nil)
	loop(p2, c2, t0.Add(time.Second), nil, nil)
	loop(p2, c2, t0.Add(time.Second+staleStatusLimit+time.Second), nil, nil)
	if c2.fitCalls != 2 || c2.writes != 2 {
		t.Errorf("past the limit: %d checks, %d writes; want 2 and 2 (the informer's empty status counts)", c2.fitCalls, c2.writes)
	}
}
