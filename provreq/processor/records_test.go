package processor

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// memStore is a RecordStore in memory; onSave sees every write.
type memStore struct {
	data    map[string]string
	loadErr error
	saveErr error
	saves   int
	onSave  func(map[string]string)
}

func (m *memStore) Load(context.Context) (map[string]string, error) {
	if m.loadErr != nil {
		return nil, m.loadErr
	}
	return maps.Clone(m.data), nil
}

func (m *memStore) Save(_ context.Context, d map[string]string) error {
	if m.saveErr != nil {
		return m.saveErr
	}
	m.saves++
	m.data = maps.Clone(d)
	if m.onSave != nil {
		m.onSave(d)
	}
	return nil
}

func (m *memStore) Reference() *apiv1.ObjectReference {
	return &apiv1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: "kube-system", Name: RecordsConfigMap}
}

// leader is one autoscaler process: a processor with the shared store; a
// new one is a restart or a new leader.
func leader(c *cluster, store *memStore, recorder record.EventRecorder) *Processor {
	opts := []Option{WithRecordStore(store)}
	if recorder != nil {
		opts = append(opts, WithEventRecorder(recorder))
	}
	return New(testOptions(), c, c, c, c.rollback, opts...)
}

func readRecord(t *testing.T, store *memStore, pr *v1.ProvisioningRequest) *requestRecord {
	t.Helper()
	data, ok := store.data[string(pr.UID)]
	if !ok {
		return nil
	}
	var rec requestRecord
	if err := json.Unmarshal([]byte(data), &rec); err != nil {
		t.Fatalf("record of %s: %v", pr.Name, err)
	}
	return &rec
}

// loopWithNodes is loop with these nodes in the cluster.
func loopWithNodes(p *Processor, c *cluster, now time.Time, names ...string) {
	ctx := context.Background()
	var nodes []*apiv1.Node
	for _, n := range names {
		nodes = append(nodes, &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	l := p.Begin(ctx, Input{Now: now})
	l.Run(ctx, c, nodes, c)
	l.Finish(ctx)
}

func events(r *record.FakeRecorder) string {
	var out []string
	for len(r.Events) > 0 {
		out = append(out, <-r.Events)
	}
	return strings.Join(out, "\n")
}

// The attempt is written before the increase, updated as its instances
// are listed, and read back by a new leader as it was.
func TestAttemptRecordRoundTrip(t *testing.T) {
	c := atomicCluster(3)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0)
	store := &memStore{}
	var atIncrease *requestRecord
	store.onSave = func(d map[string]string) {
		if atIncrease == nil && c.scaleCalls == 1 {
			atIncrease = readRecord(t, store, pr)
		}
	}
	p1 := leader(c, store, nil)
	loop(p1, c, t0, nil, nil)
	if atIncrease == nil || atIncrease.Attempt == nil {
		t.Fatal("nothing recorded during the scale-up")
	}
	if sh := atIncrease.Attempt.Groups["g"]; sh.Asked != 3 || len(sh.Claimed) != 0 || strings.Join(sh.Before, ",") != "old" ||
		!atIncrease.Attempt.Started.Equal(t0) {
		t.Errorf("recorded before the increase: %+v started %v; want g asked 3, nothing claimed, old before, started %v",
			sh, atIncrease.Attempt.Started, t0)
	}
	c.groups["g"] = view(4, "old=old", "i1", "i2=n2")
	loop(p1, c, t0.Add(time.Minute), nil, nil)
	rec := readRecord(t, store, pr)
	if rec == nil || rec.Attempt == nil || strings.Join(rec.Attempt.Groups["g"].Claimed, ",") != "i1,i2" {
		t.Fatalf("record after the instances were listed: %+v, want i1 and i2 claimed", rec)
	}

	p2 := leader(c, store, nil)
	loop(p2, c, t0.Add(2*time.Minute), nil, nil)
	got, want := p2.states[pr.UID].attempt, p1.states[pr.UID].attempt
	if got == nil || !got.started.Equal(want.started) || describeShares(got.groups) != describeShares(want.groups) ||
		strings.Join(sortedKeys(got.groups["g"].before), ",") != "old" {
		t.Fatalf("restored attempt %+v, want %+v", got, want)
	}
	if c.scaleCalls != 1 || len(c.rolledBack) != 0 {
		t.Errorf("scale-ups %d, rollbacks %v after the restore; want the first scale-up only", c.scaleCalls, c.rolledBack)
	}
}

// A new leader finishes the attempt it found: the request is Provisioned
// once the instances asked for registered, without a second scale-up, and
// its nodes are recorded for as long as it is provisioned.
func TestRestoredAttemptIsProvisionedWhenItsNodesJoin(t *testing.T) {
	c := atomicCluster(2)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	store := &memStore{}
	loop(leader(c, store, nil), c, t0, nil, nil) // then killed
	c.groups["g"] = view(3, "old=old", "i1", "i2")
	p2 := leader(c, store, nil)
	loop(p2, c, t0.Add(time.Minute), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2=n2")
	loop(p2, c, t0.Add(2*time.Minute), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	if c.scaleCalls != 1 || len(c.rolledBack) != 0 {
		t.Errorf("scale-ups %d, rollbacks %v; want the first leader's scale-up only", c.scaleCalls, c.rolledBack)
	}
	rec := readRecord(t, store, pr)
	if rec == nil || rec.Attempt != nil || strings.Join(rec.Nodes, ",") != "n1,n2" {
		t.Fatalf("record %+v, want no attempt and the nodes n1, n2", rec)
	}
	// A third leader knows the request's nodes: one of them gone revokes it.
	p3 := leader(c, store, nil)
	loopWithNodes(p3, c, t0.Add(3*time.Minute), "n1", "n2")
	if cond(t, pr, provreq.ConditionCapacityRevoked) != nil {
		t.Fatal("revoked with both nodes present")
	}
	loopWithNodes(leader(c, store, nil), c, t0.Add(4*time.Minute), "n1")
	wantCond(t, pr, provreq.ConditionCapacityRevoked, metav1.ConditionTrue, ReasonCapacityLost)
	// Once the booking is over the nodes are no longer kept.
	if rec := readRecord(t, store, pr); rec != nil {
		t.Errorf("record %+v kept for a request no longer provisioned", rec)
	}
}

// A new leader rolls back the attempt it found when it times out: the
// deadline is the first leader's, and exactly the instances claimed are
// deleted by name (with those never listed cancelled).
func TestRestoredAttemptRollsBackAtTheFirstLeadersDeadline(t *testing.T) {
	c := atomicCluster(3, "i1")
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0)
	store := &memStore{}
	loop(leader(c, store, nil), c, t0, nil, nil)
	c.groups["g"] = view(4, "old=old", "i1=n1")
	p2 := leader(c, store, nil)
	loop(p2, c, t0.Add(14*time.Minute), nil, nil)
	if len(c.rolledBack) != 0 {
		t.Fatalf("rolled back %v before the deadline", c.rolledBack)
	}
	loop(p2, c, t0.Add(16*time.Minute), nil, nil)
	if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[i1] 2}]" {
		t.Fatalf("rolled back %v, want i1 by name and two unlisted", c.rolledBack)
	}
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	if rec := readRecord(t, store, pr); rec != nil {
		t.Errorf("record %+v kept after a complete rollback", rec)
	}
	// A third leader finds nothing to do again.
	loop(leader(c, store, nil), c, t0.Add(17*time.Minute), nil, nil)
	if len(c.rolledBack) != 1 {
		t.Errorf("rolled back again: %v", c.rolledBack)
	}
}

// A leader killed after recording the attempt but before increasing
// anything: the new leader sees that the target does not cover the
// instances asked for and rolls the attempt back without naming any
// instance, then the request is retried.
func TestRecordedAttemptWhoseIncreaseNeverHappened(t *testing.T) {
	c := atomicCluster(2)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	store := &memStore{}
	loop(leader(c, store, nil), c, t0, nil, nil)
	c.groups["g"] = view(1, "old=old") // the increase never reached the cloud
	p2 := leader(c, store, nil)
	loop(p2, c, t0.Add(time.Minute), nil, nil)
	if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[] 2}]" {
		t.Fatalf("rolled back %v, want only the two never listed (the real rollback cancels none: the target does not hold them)",
			c.rolledBack)
	}
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
}

// When the attempt cannot be recorded, nothing is increased: the request
// backs off and says why.
func TestNoIncreaseWithoutARecord(t *testing.T) {
	c := atomicCluster(2)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	store := &memStore{saveErr: errors.New("etcd is down")}
	p := leader(c, store, nil)
	loop(p, c, t0, nil, nil)
	if p.states[pr.UID].attempt != nil {
		t.Fatal("an attempt is in flight although it could not be recorded")
	}
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	if msg := cond(t, pr, provreq.ConditionProvisioned).Message; !strings.Contains(msg, "etcd is down") ||
		!strings.Contains(msg, "nothing was increased") {
		t.Errorf("message %q does not say the record failed and nothing was done", msg)
	}
}

// Until the records are read, no atomic scale-up, rollback or record write
// is made (it could double an attempt in flight, or erase its record);
// check-capacity requests are answered all the same.
func TestNothingAtomicBeforeTheRecordsAreRead(t *testing.T) {
	c := atomicCluster(2)
	c.fits = false
	atomicReq := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	check := c.addRequest("b", provreq.ClassCheckCapacity, 1, nil, t0)
	store := &memStore{loadErr: errors.New("connection refused")}
	p := leader(c, store, nil)
	c.fits = true
	loop(p, c, t0, nil, nil)
	if c.scaleCalls != 0 || store.saves != 0 {
		t.Fatalf("scale-ups %d, record writes %d while the records are unread; want none", c.scaleCalls, store.saves)
	}
	wantCond(t, check, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	store.loadErr = nil
	c.fits = false
	loop(p, c, t0.Add(time.Second), nil, nil)
	if c.scaleCalls != 1 || p.states[atomicReq.UID].attempt == nil {
		t.Errorf("scale-ups %d once the records are read; want the atomic request's", c.scaleCalls)
	}
}

// The records are written before the statuses: a leader that dies between
// the two never leaves a request Provisioned with its attempt still on
// record (a new leader would roll back provisioned capacity).
func TestRecordsAreWrittenBeforeStatuses(t *testing.T) {
	c := atomicCluster(2)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	store := &memStore{}
	p := leader(c, store, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2=n2")
	store.onSave = func(d map[string]string) {
		if provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionProvisioned) {
			t.Error("the status said Provisioned before the record dropped the attempt")
		}
	}
	loop(p, c, t0.Add(time.Minute), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	store.onSave = nil
	// And a record that still holds the attempt of a request the status
	// says is Provisioned (written by hand, or by an older version) is
	// dropped, not rolled back.
	store.data[string(pr.UID)] = `{"version":1,"request":"ns/a","attempt":{"started":"2026-01-01T00:00:00Z",` +
		`"groups":{"g":{"asked":2,"before":["old"],"claimed":["i1","i2"]}}}}`
	loop(leader(c, store, nil), c, t0.Add(2*time.Minute), nil, nil)
	if len(c.rolledBack) != 0 {
		t.Errorf("rolled back %v the provisioned request's nodes", c.rolledBack)
	}
}

// Records that cannot be trusted are left out with a log line and Warning
// events: nothing they name is deleted, and the other records are restored.
func TestInvalidRecordsAreLeftOut(t *testing.T) {
	good := `{"version":1,"request":"ns/good","attempt":{"started":"2026-01-01T00:00:00Z",` +
		`"groups":{"g":{"asked":2,"before":["old"],"claimed":["i1"]}}}}`
	for _, tc := range []struct {
		name, record, why string
	}{
		{name: "valid (the control)", record: good},
		{name: "not JSON", record: `{"version":1,"request":`, why: "not a record"},
		{name: "trailing text", record: good + ` {}`, why: "text after the JSON document"},
		{name: "another version", record: strings.Replace(good, `"version":1`, `"version":2`, 1), why: "version 2"},
		{name: "claims more than asked", record: strings.Replace(good, `"asked":2`, `"asked":0`, 1), why: "more than the 0 asked"},
		{name: "claims an old instance", record: strings.Replace(good, `"claimed":["i1"]`, `"claimed":["old"]`, 1),
			why: "was there before the increase"},
		{name: "claims the other request's instance", record: strings.Replace(good, `"claimed":["i1"]`, `"claimed":["o1"]`, 1),
			why: "claimed twice"},
		{name: "starts in the future", record: strings.Replace(good, "2026-01-01", "2036-01-01", 1), why: "not a past time"},
		{name: "no start", record: strings.Replace(good, `"started":"2026-01-01T00:00:00Z",`, ``, 1), why: "not a past time"},
		{name: "bad node name", record: `{"version":1,"request":"ns/good","nodes":["Not A Node"]}`, why: "node name"},
		{name: "another request's name", record: strings.Replace(good, "ns/good", "ns/another", 1), why: "the request of UID uid-good is ns/good"},
		{name: "not a request name", record: strings.Replace(good, "ns/good", "good", 1), why: `request "good" is not a namespace/name`},
		{name: "adopts an old instance", record: strings.Replace(good, `"claimed":["i1"]`, `"claimed":["i1"],"adopted":["old"]`, 1),
			why: "was there before the increase"},
		{name: "adopts more than asked", record: strings.Replace(good, `"claimed":["i1"]`, `"claimed":["i1"],"adopted":["a1","a2"]`, 1),
			why: "3 instances claimed or adopted, more than the 2 asked"},
		{name: "keeps an instance it does not claim", record: strings.Replace(good, `"claimed":["i1"]`, `"claimed":["i1"],"kept":{"zz":"busy"}`, 1),
			why: "instance zz is kept but not claimed"},
		{name: "fails before it starts", record: `{"version":1,"request":"ns/good","rollbacks":[{"why":"x","since":"2026-01-01T00:00:00Z",` +
			`"failed":"2025-12-31T00:00:00Z","groups":{"g":{"asked":1,"claimed":["i1"]}}}]}`, why: "not a past time after its start"},
		{name: "no group", record: `{"version":1,"request":"ns/good","attempt":{"started":"2026-01-01T00:00:00Z","groups":{}}}`,
			why: "no node group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := atomicCluster(2, "i1")
			c.groups["g"] = view(5, "old=old", "i1", "o1")
			pr := c.addRequest("good", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
			// Its UID sorts before good's: its record is read first.
			other := c.addRequest("another", provreq.ClassBestEffortAtomicScaleUp, 4, nil, t0)
			store := &memStore{data: map[string]string{
				string(other.UID): `{"version":1,"request":"ns/another","attempt":{"started":"2026-01-01T00:00:00Z",` +
					`"groups":{"g":{"asked":1,"before":["old"],"claimed":["o1"]}}}}`,
				string(pr.UID): tc.record,
			}}
			recorder := record.NewFakeRecorder(20)
			p := leader(c, store, recorder)
			// Past both attempts' deadlines (within the stale margin): any
			// attempt restored is rolled back.
			loop(p, c, t0.Add(16*time.Minute), nil, nil)
			ev := events(recorder)
			var named []string
			for _, u := range c.rolledBack {
				for _, un := range u {
					named = append(named, un.Instances...)
				}
			}
			if tc.why == "" {
				if strings.Contains(ev, ReasonInvalidRecord) || strings.Join(named, ",") != "o1,i1" {
					t.Errorf("events %q, deleted by name %v; want no warning and both records' instances", ev, named)
				}
				return
			}
			if !strings.Contains(ev, "Warning "+ReasonInvalidRecord) || !strings.Contains(ev, tc.why) {
				t.Errorf("events %q, want a Warning %s saying %q", ev, ReasonInvalidRecord, tc.why)
			}
			if strings.Join(named, ",") != "o1" {
				t.Errorf("instances deleted by name %v, want only o1 (the valid record's)", named)
			}
		})
	}
}

// An attempt on record for a check-capacity request (which never scales
// up) is left out: nothing it names is deleted.
func TestAttemptRecordOfACheckCapacityRequestIsLeftOut(t *testing.T) {
	c := atomicCluster(2, "i1")
	c.fits = true
	pr := c.addRequest("a", provreq.ClassCheckCapacity, 8, nil, t0)
	store := &memStore{data: map[string]string{string(pr.UID): `{"version":1,"request":"ns/a","attempt":{` +
		`"started":"2026-01-01T00:00:00Z","groups":{"g":{"asked":2,"before":["old"],"claimed":["i1"]}}}}`}}
	recorder := record.NewFakeRecorder(20)
	loop(leader(c, store, recorder), c, t0.Add(20*time.Minute), nil, nil)
	if ev := events(recorder); !strings.Contains(ev, "Warning "+ReasonInvalidRecord) || !strings.Contains(ev, "check-capacity") {
		t.Errorf("events %q, want a Warning about the class", ev)
	}
	if len(c.rolledBack) != 0 {
		t.Errorf("rolled back %v", c.rolledBack)
	}
}

// A record naming a node group the provider does not know: that share is
// dropped with a Warning event, the rest of the attempt (which cannot be
// all-or-nothing any more) is rolled back, and the request backs off.
func TestRecordWithAnUnknownGroup(t *testing.T) {
	c := atomicCluster(2, "i1")
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	store := &memStore{data: map[string]string{string(pr.UID): `{"version":1,"request":"ns/a","attempt":{` +
		`"started":"2026-01-01T00:00:00Z","groups":{"g":{"asked":2,"before":["old"],"claimed":["i1"]},` +
		`"typo":{"asked":1,"claimed":["x1"]}}}}`}}
	recorder := record.NewFakeRecorder(20)
	loop(leader(c, store, recorder), c, t0.Add(time.Minute), nil, nil)
	ev := events(recorder)
	if !strings.Contains(ev, "Warning "+ReasonInvalidRecord) || !strings.Contains(ev, "typo") {
		t.Errorf("events %q, want a Warning naming the group typo", ev)
	}
	if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[i1] 1}]" {
		t.Fatalf("rolled back %v, want g's share only", c.rolledBack)
	}
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonRecordInvalid)
	if c.scaleCalls != 0 {
		t.Errorf("scaled up %d times in the loop that rolled back; want a back-off first", c.scaleCalls)
	}
}

// Check-capacity bookings need no record: a new leader books a provisioned
// request's pods from its conditions in its first loop, so a second
// request cannot take that room, and it does not check it again.
func TestCheckCapacityBookingSurvivesARestart(t *testing.T) {
	c := &cluster{fits: true}
	first := c.addRequest("first", provreq.ClassCheckCapacity, 3, nil, t0)
	loop(newTestProcessor(c, nil), c, t0, nil, nil)
	wantCond(t, first, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)

	c.fitCalls, c.placed = 0, 0
	c.fits = false // the room left after the booking holds no second request
	second := c.addRequest("second", provreq.ClassCheckCapacity, 3, nil, t0.Add(time.Second))
	p2 := newTestProcessor(c, nil)
	loop(p2, c, t0.Add(time.Minute), []*apiv1.Pod{consumer("first", true)}, nil)
	if c.placed != 2 {
		t.Errorf("the new leader booked %d pods, want the 2 of the first request not scheduled yet", c.placed)
	}
	if c.fitCalls != 1 {
		t.Errorf("%d capacity checks, want only the second request's", c.fitCalls)
	}
	wantCond(t, first, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	wantCond(t, second, provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	// The booking window still counts from the first leader's Provisioned.
	loop(p2, c, t0.Add(11*time.Minute), nil, nil)
	wantCond(t, first, provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityReservationTimeExpired)
}

// WaitingForNodes is called from the informers' goroutine while a loop
// runs: it must not race with the loop's changes (go test -race).
func TestWaitingForNodesDuringALoop(t *testing.T) {
	c := atomicCluster(2)
	c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	p := leader(c, &memStore{}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1000; i++ {
			p.WaitingForNodes()
		}
	}()
	for i := 0; i < 20; i++ {
		loop(p, c, t0.Add(time.Duration(i)*time.Second), nil, nil)
	}
	<-done
	if !p.WaitingForNodes() {
		t.Error("not waiting for the attempt's nodes")
	}
}
