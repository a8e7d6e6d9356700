package processor

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
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
			// Past both attempts' deadlines: any attempt restored is rolled back.
			loop(p, c, t0.Add(20*time.Minute), nil, nil)
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
