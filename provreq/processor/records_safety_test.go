package processor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// The record of a request deleted while no autoscaler ran, or deleted and
// recreated under the same name (another UID): nothing it names is
// deleted or cancelled (the instances it made are left to scale-down and
// the cleanup), it is dropped, and a Warning event on the records' object
// says why. On the code before, the attempt was cancelled (its target
// decreased) and its rollbacks deleted their instances.
func TestRecordOfAGoneRequestIsDroppedWithAWarning(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		recreate  bool
	}{
		{name: "deleted", why: "the request no longer exists"},
		{name: "recreated", why: "the request was recreated", recreate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := atomicCluster(3, "i1")
			pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0)
			store := &memStore{}
			p1 := leader(c, store, nil)
			loop(p1, c, t0, nil, nil)
			// And a rollback on record, as a failed request leaves it.
			var rec requestRecord
			if err := json.Unmarshal([]byte(store.data[string(pr.UID)]), &rec); err != nil {
				t.Fatal(err)
			}
			rec.Rollbacks = []undoRecord{{Why: "test", Since: t0, Groups: map[string]shareRecord{"g": {Asked: 1, Claimed: []string{"i9"}}}}}
			data, _ := json.Marshal(rec)
			store.data[string(pr.UID)] = string(data)
			c.requests = nil
			if tc.recreate {
				c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0.Add(time.Minute)).UID = "uid-a-2"
			}
			c.groups["g"] = view(5, "old=old", "i1=n1", "i9=n9")
			recorder := record.NewFakeRecorder(20)
			loop(leader(c, store, recorder), c, t0.Add(2*time.Minute), nil, nil)
			for _, u := range c.rolledBack {
				t.Errorf("rolled back %v, want nothing deleted or cancelled", u)
			}
			if _, ok := store.data[string(pr.UID)]; ok {
				t.Errorf("record %s kept", store.data[string(pr.UID)])
			}
			ev := events(recorder)
			if !strings.Contains(ev, "Warning "+ReasonOrphanedRecord) || !strings.Contains(ev, tc.why) {
				t.Errorf("events %q, want a Warning %s saying %q", ev, ReasonOrphanedRecord, tc.why)
			}
		})
	}
}

// A new leader never attributes an instance to a restored attempt or
// rollback by the before-list: after a restart an instance the group did
// not have before may be another scale-up's or an operator's. Only the
// instances the first leader claimed are deleted; instances listed since
// count toward the attempt's progress but are never deleted. On the code
// before, the new leader claimed and deleted them.
func TestRestoredRecordsDeleteOnlyClaimedInstances(t *testing.T) {
	t.Run("unfinished rollback", func(t *testing.T) {
		c := atomicCluster(2, "i1")
		pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
		store := &memStore{}
		p1 := leader(c, store, nil)
		loop(p1, c, t0, nil, nil)
		pr.CreationTimestamp = metav1.NewTime(t0.Add(-7 * 24 * time.Hour)) // expires: rolled back
		c.left = map[string]scaleup.Undo{"g": {Unlisted: 1}}               // one never listed
		loop(p1, c, t0.Add(time.Minute), nil, nil)
		if rec := readRecord(t, store, pr); rec == nil || len(rec.Rollbacks) != 1 {
			t.Fatalf("record %+v, want the unfinished rollback", rec)
		}
		c.groups["g"] = view(2, "old=old", "x1=x1") // x1: an operator's instance, listed after the restart
		loop(leader(c, store, nil), c, t0.Add(2*time.Minute), nil, nil)
		for _, u := range c.rolledBack[1:] {
			if strings.Contains(undoString(u), "x1") {
				t.Errorf("rolled back %v: x1 deleted", u)
			}
		}
		if len(store.data) != 0 {
			t.Errorf("records %v left after the rollback ended", store.data)
		}
	})
	t.Run("attempt that times out", func(t *testing.T) {
		c := atomicCluster(3, "i1")
		pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0)
		store := &memStore{}
		loop(leader(c, store, nil), c, t0, nil, nil)
		// Two instances the group did not have before appear while no
		// leader runs: not attributable to the attempt.
		c.groups["g"] = view(4, "old=old", "i1=n1", "x1=x1", "x2")
		p2 := leader(c, store, nil)
		loop(p2, c, t0.Add(time.Minute), nil, nil)
		wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
		if rec := readRecord(t, store, pr); rec == nil || rec.Attempt == nil ||
			strings.Join(rec.Attempt.Groups["g"].Claimed, ",") != "i1" || strings.Join(rec.Attempt.Groups["g"].Adopted, ",") != "x1,x2" {
			t.Fatalf("record %+v, want i1 claimed and x1, x2 adopted", rec)
		}
		loop(p2, c, t0.Add(16*time.Minute), nil, nil) // x2 never registers: timed out
		if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[i1] 0}]" {
			t.Fatalf("rolled back %v, want i1 by name only", c.rolledBack)
		}
		if got := c.rolledBack[0]["g"].Request; got != "ns/a" {
			t.Errorf("rollback for request %q, want ns/a (its consumers do not keep a node)", got)
		}
	})
}

// A record older than --max-node-provision-time plus the margin (its
// leader would have ended it long ago) rolls back nothing: its attempt
// and rollbacks are dropped with a Warning event on the records' object
// and the request. On the code before, the new leader rolled it back.
func TestStaleRecordRollsBackNothing(t *testing.T) {
	c := atomicCluster(3, "i1")
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0)
	store := &memStore{data: map[string]string{string(pr.UID): `{"version":1,"request":"ns/a","attempt":{` +
		`"started":"2026-01-01T00:00:00Z","groups":{"g":{"asked":3,"before":["old"],"claimed":["i1"]}}},` +
		`"rollbacks":[{"why":"earlier","since":"2026-01-01T00:00:00Z","groups":{"g":{"asked":1,"claimed":["i0"]}}}]}`}}
	c.groups["g"] = view(5, "old=old", "i0=n0", "i1=n1")
	c.fits = true // once the attempt is dropped, the request fits the nodes there
	recorder := record.NewFakeRecorder(20)
	p := leader(c, store, recorder)
	loop(p, c, t0.Add(20*time.Minute+time.Second), nil, nil)
	if len(c.rolledBack) != 0 || len(p.undos) != 0 || p.states[pr.UID].attempt != nil {
		t.Errorf("rolled back %v, %d rollbacks, attempt %v; want nothing restored", c.rolledBack, len(p.undos), p.states[pr.UID].attempt)
	}
	ev := events(recorder)
	if strings.Count(ev, "Warning "+ReasonStaleRecord) != 2 || !strings.Contains(ev, "the attempt (started 2026-01-01T00:00:00Z), rollback 0") {
		t.Errorf("events %q, want a Warning %s on the ConfigMap and the request naming the attempt and the rollback", ev, ReasonStaleRecord)
	}
	if rec := readRecord(t, store, pr); rec != nil {
		t.Errorf("record %+v kept", rec)
	}
	// Within the margin it is acted on (the control).
	c = atomicCluster(3, "i1")
	pr = c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0)
	store.data = map[string]string{string(pr.UID): `{"version":1,"request":"ns/a","attempt":{` +
		`"started":"2026-01-01T00:00:00Z","groups":{"g":{"asked":3,"before":["old"],"claimed":["i1"]}}}}`}
	loop(leader(c, store, nil), c, t0.Add(19*time.Minute), nil, nil)
	if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[i1] 2}]" {
		t.Errorf("rolled back %v within the margin, want i1 and the two never listed", c.rolledBack)
	}
}

// A rollback never deletes a node that runs other pods: the instance the
// rollback kept is reported once by a Warning event, stays on record with
// why, and is retried; when the rollback does not finish in time it is
// recorded as failed (with a Warning event) and nothing more is done for
// it, by this leader or the next.
func TestRollbackKeptNodeIsReportedAndRecordedAsFailed(t *testing.T) {
	c := atomicCluster(2, "i1", "i2")
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	store := &memStore{}
	recorder := record.NewFakeRecorder(50)
	p := leader(c, store, recorder)
	loop(p, c, t0, nil, nil)
	pr.CreationTimestamp = metav1.NewTime(t0.Add(-7 * 24 * time.Hour)) // expires: rolled back
	kept := func() map[string]scaleup.Undo {
		return map[string]scaleup.Undo{"g": {Instances: []string{"i1"}, Request: "ns/a",
			Kept: map[string]string{"i1": "node n1 runs pods that are not the request's: ns/web"}}}
	}
	c.left = kept()
	loop(p, c, t0.Add(time.Minute), nil, nil)
	if got := c.rolledBack[0]["g"]; got.Request != "ns/a" || strings.Join(got.Instances, ",") != "i1,i2" {
		t.Fatalf("rollback %+v, want i1 and i2 for ns/a", got)
	}
	ev := events(recorder)
	if strings.Count(ev, "Warning "+ReasonRollbackKeptNode) != 2 || !strings.Contains(ev, "ns/web") {
		t.Errorf("events %q, want a Warning %s on the ConfigMap and the request naming the pod", ev, ReasonRollbackKeptNode)
	}
	rec := readRecord(t, store, pr)
	if rec == nil || len(rec.Rollbacks) != 1 || rec.Rollbacks[0].Groups["g"].Kept["i1"] == "" {
		t.Fatalf("record %+v, want the rollback with i1 kept", rec)
	}
	c.left = kept()
	loop(p, c, t0.Add(2*time.Minute), nil, nil)
	if ev := events(recorder); strings.Contains(ev, ReasonRollbackKeptNode) {
		t.Errorf("events %q: the kept instance reported again", ev)
	}
	c.left = kept()
	loop(p, c, t0.Add(17*time.Minute), nil, nil)
	if ev := events(recorder); !strings.Contains(ev, "Warning "+ReasonRollbackFailed) {
		t.Errorf("events %q, want a Warning %s", ev, ReasonRollbackFailed)
	}
	rec = readRecord(t, store, pr)
	if rec == nil || len(rec.Rollbacks) != 1 || rec.Rollbacks[0].Failed.IsZero() || len(p.undos) != 0 {
		t.Fatalf("record %+v, %d rollbacks to do; want the rollback recorded as failed and none to do", rec, len(p.undos))
	}
	calls := len(c.rolledBack)
	p2 := leader(c, store, recorder)
	loop(p2, c, t0.Add(18*time.Minute), nil, nil)
	if len(c.rolledBack) != calls || len(p2.failed) != 1 {
		t.Errorf("the next leader rolled back %v (failed on record: %d); want nothing done", c.rolledBack[calls:], len(p2.failed))
	}
	if readRecord(t, store, pr) == nil {
		t.Error("the failed rollback is no longer on record")
	}
	c.requests = nil // the request is gone: its failed rollback goes too
	loop(p2, c, t0.Add(19*time.Minute), nil, nil)
	if len(store.data) != 0 {
		t.Errorf("records %v, want none once the request is gone", store.data)
	}
}

// The records are bounded: the finished ones (nothing left to do) are
// dropped oldest first until the rest fits; records of attempts and
// rollbacks to do are never dropped, and when they alone do not fit the
// write fails.
func TestRecordsAreBoundedOldestFinishedFirst(t *testing.T) {
	recs := func() map[string]string {
		return map[string]string{"active": strings.Repeat("a", 40), "old": strings.Repeat("o", 40),
			"new": strings.Repeat("n", 40), "older": strings.Repeat("x", 40)}
	}
	finished := map[string]time.Time{"old": t0.Add(time.Hour), "new": t0.Add(2 * time.Hour), "older": t0}
	for _, tc := range []struct {
		name    string
		limit   int
		want    []string
		dropped int
		err     bool
	}{
		{name: "fits", limit: 1000, want: []string{"active", "new", "old", "older"}},
		{name: "one too many", limit: 3 * 45, want: []string{"active", "new", "old"}, dropped: 1},
		{name: "only the newest finished fits", limit: 2 * 45, want: []string{"active", "new"}, dropped: 2},
		{name: "active only", limit: 46, want: []string{"active"}, dropped: 3},
		{name: "not even the active one", limit: 40, want: []string{"active"}, dropped: 3, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recs()
			dropped, err := bound(r, finished, tc.limit)
			if (err != nil) != tc.err || dropped != tc.dropped {
				t.Errorf("dropped %d, err %v; want %d, error %v", dropped, err, tc.dropped, tc.err)
			}
			if diff := cmp.Diff(tc.want, sortedKeys(r)); diff != "" {
				t.Errorf("records kept (-want +got):\n%s", diff)
			}
		})
	}
}

// An attempt whose record would not fit the size limit is not started:
// nothing is increased, and the request says why.
func TestAttemptThatDoesNotFitTheRecordsIsNotStarted(t *testing.T) {
	c := atomicCluster(2)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	store := &memStore{}
	p := leader(c, store, nil)
	p.maxRecordsSize = 50
	loop(p, c, t0, nil, nil)
	if p.states[pr.UID].attempt != nil || store.saves != 0 {
		t.Fatalf("attempt %v, %d writes; want none", p.states[pr.UID].attempt, store.saves)
	}
	if msg := cond(t, pr, provreq.ConditionProvisioned).Message; !strings.Contains(msg, "more than the 50") ||
		!strings.Contains(msg, "nothing was increased") {
		t.Errorf("message %q does not say the record is too large and nothing was done", msg)
	}
}

// The finished records are those with nothing to do, with when they
// finished: a provisioned request's nodes (when it was provisioned).
func TestFinishedRecords(t *testing.T) {
	c := atomicCluster(2, "i1", "i2")
	a := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	store := &memStore{}
	p := leader(c, store, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2=n2")
	loop(p, c, t0.Add(time.Minute), nil, nil)
	wantCond(t, a, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	c.atomic.Instances = map[string][]string{"g": {"i3"}}
	c.atomic.Before = map[string][]string{"g": {"old", "i1", "i2"}}
	b := c.addRequest("b", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	loopWithNodes(p, c, t0.Add(2*time.Minute), "old", "n1", "n2")
	l := p.Begin(context.Background(), Input{Now: t0.Add(3 * time.Minute)})
	_, finished, err := l.records(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{string(a.UID): t0.Add(time.Minute)}
	if diff := cmp.Diff(want, finished); diff != "" {
		t.Errorf("finished records (-want +got):\n%s", diff)
	}
	if p.states[b.UID].attempt == nil {
		t.Error("b has no attempt in flight")
	}
}

// FuzzRestoredRecord restores an arbitrary record and runs a new leader's
// loops over it, past its deadline: it never panics, and no rollback ever
// names an instance the record does not claim (the group also lists an old
// instance and two it never claimed).
func FuzzRestoredRecord(f *testing.F) {
	for _, seed := range []string{
		`{"version":1,"request":"ns/good","attempt":{"started":"2026-01-01T00:00:00Z","groups":{"g":{"asked":3,"before":["old"],"claimed":["i1"]}}}}`,
		`{"version":1,"request":"ns/good","attempt":{"started":"2026-01-01T00:00:00Z","groups":{"g":{"asked":3,"claimed":["i1"],"adopted":["x1"]}}}}`,
		`{"version":1,"request":"ns/good","rollbacks":[{"why":"w","since":"2026-01-01T00:05:00Z","groups":{"g":{"asked":2,"claimed":["i1"],"kept":{"i1":"busy"}}}}]}`,
		`{"version":1,"request":"ns/good","rollbacks":[{"why":"w","since":"2026-01-01T00:00:00Z","lastChance":true,"groups":{"g":{"asked":2}}}]}`,
		`{"version":1,"request":"ns/good","rollbacks":[{"why":"w","since":"2026-01-01T00:00:00Z","failed":"2026-01-01T00:01:00Z","groups":{"g":{"asked":1,"claimed":["i1"]}}}]}`,
		`{"version":1,"request":"ns/good","rollbacks":[{"why":"w","since":"2026-01-01T00:00:00Z","cancelOnly":true,"groups":{"g":{"asked":4}}}]}`,
		`{"version":1,"request":"ns/good","nodes":["x1"]}`,
		`{"version":1,"request":"ns/good","attempt":{"started":"2025-01-01T00:00:00Z","groups":{"g":{"asked":1,"claimed":["x2"]}}}}`,
		`{"version":1}`, `[]`, `{"version":1,"request":"ns/good","attempt":{"started":"2026-01-01T00:00:00Z","groups":{"":{"asked":-1}}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		c := &cluster{atomic: scaleup.AtomicResult{Reason: "no room"},
			groups: map[string]GroupView{"g": view(6, "old=old", "i1", "x1=x1", "x2")}}
		c.addRequest("good", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
		store := &memStore{data: map[string]string{"uid-good": data}}
		p := leader(c, store, record.NewFakeRecorder(1000))
		for _, at := range []time.Duration{time.Minute, 16 * time.Minute, 17 * time.Minute, 40 * time.Minute} {
			loop(p, c, t0.Add(at), nil, nil)
		}
		claimed := map[string]bool{}
		var rec requestRecord
		if json.Unmarshal([]byte(data), &rec) == nil {
			shares := []map[string]shareRecord{}
			if rec.Attempt != nil {
				shares = append(shares, rec.Attempt.Groups)
			}
			for _, u := range rec.Rollbacks {
				shares = append(shares, u.Groups)
			}
			for _, groups := range shares {
				for _, sh := range groups {
					for _, id := range sh.Claimed {
						claimed[id] = true
					}
				}
			}
		}
		for _, u := range c.rolledBack {
			for _, un := range u {
				for _, id := range un.Instances {
					if !claimed[id] {
						t.Fatalf("record %s: rollback %v names %s, which it does not claim", data, u, id)
					}
				}
			}
		}
	})
}
