package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// RecordsConfigMap is the ConfigMap, in the autoscaler's namespace, that
// holds the records of the all-or-nothing attempts in flight.
const RecordsConfigMap = "cluster-autoscaler-provisioning-attempts"

// RecordStore keeps the processor's records where the next leader finds
// them: one JSON document per ProvisioningRequest, keyed by the request's
// UID. Save replaces every record.
type RecordStore interface {
	Load(ctx context.Context) (map[string]string, error)
	Save(ctx context.Context, records map[string]string) error
	// Reference is the object that events about the records are recorded on.
	Reference() *apiv1.ObjectReference
}

// WithRecordStore persists the all-or-nothing attempts in flight, the
// rollbacks still to finish and the nodes of provisioned atomic requests
// in store, and restores them in the first loop; without it they live in
// memory only and a restart forgets them.
func WithRecordStore(s RecordStore) Option { return func(p *Processor) { p.store = s } }

// recordVersion is the version of the record format written.
const recordVersion = 1

// ReasonInvalidRecord is the reason of the Warning event about a record
// that cannot be restored.
const ReasonInvalidRecord = "InvalidAttemptRecord"

// requestRecord is what is kept of one request.
type requestRecord struct {
	Version int `json:"version"`
	// Request is namespace/name, for people and logs.
	Request string `json:"request"`
	// Attempt is the all-or-nothing scale-up in flight.
	Attempt *attemptRecord `json:"attempt,omitempty"`
	// Rollbacks are undos of its failed or abandoned attempts not finished.
	Rollbacks []undoRecord `json:"rollbacks,omitempty"`
	// Nodes are the nodes an atomic request was provisioned with, while it
	// is provisioned: one of them gone revokes its capacity.
	Nodes []string `json:"nodes,omitempty"`
}

type attemptRecord struct {
	Started time.Time              `json:"started"`
	Groups  map[string]shareRecord `json:"groups"`
}

// shareRecord is one node group's share: asked instances, the instances
// the group listed before the increase, and those attributed to it since.
type shareRecord struct {
	Asked   int      `json:"asked"`
	Before  []string `json:"before,omitempty"`
	Claimed []string `json:"claimed,omitempty"`
}

type undoRecord struct {
	Why        string                 `json:"why"`
	Since      time.Time              `json:"since"`
	Groups     map[string]shareRecord `json:"groups"`
	LastChance bool                   `json:"lastChance,omitempty"`
	CancelOnly bool                   `json:"cancelOnly,omitempty"`
}

func shareToRecord(sh *share) shareRecord {
	r := shareRecord{Asked: sh.asked, Claimed: append([]string(nil), sh.claimed...)}
	for id := range sh.before {
		r.Before = append(r.Before, id)
	}
	sort.Strings(r.Before)
	return r
}

func sharesToRecord(groups map[string]*share) map[string]shareRecord {
	out := make(map[string]shareRecord, len(groups))
	for g, sh := range groups {
		out[g] = shareToRecord(sh)
	}
	return out
}

func sharesFromRecord(groups map[string]shareRecord) map[string]*share {
	out := make(map[string]*share, len(groups))
	for g, r := range groups {
		sh := &share{asked: r.Asked, before: make(map[string]bool, len(r.Before)), claimed: append([]string(nil), r.Claimed...)}
		for _, id := range r.Before {
			sh.before[id] = true
		}
		out[g] = sh
	}
	return out
}

// records is what the store should hold now: one record per request with
// an attempt in flight, a rollback to finish or provisioned nodes. attempt,
// when not nil, is taken as r's attempt (the one about to be made).
func (l *Loop) records(r *request, at *attempt) (map[string]string, error) {
	byUID := map[types.UID]*requestRecord{}
	get := func(uid types.UID, name string) *requestRecord {
		rec := byUID[uid]
		if rec == nil {
			rec = &requestRecord{Version: recordVersion, Request: name}
			byUID[uid] = rec
		}
		return rec
	}
	for _, q := range l.requests {
		a := q.state.attempt
		if q == r {
			a = at
		}
		if a != nil {
			get(q.pr.UID, q.state.name).Attempt = &attemptRecord{Started: a.started.UTC(), Groups: sharesToRecord(a.groups)}
		}
		if len(q.state.nodes) > 0 && q.provisioned() {
			rec := get(q.pr.UID, q.state.name)
			rec.Nodes = sortedKeys(q.state.nodes)
		}
	}
	for _, u := range l.p.undos {
		if u.owner == "" {
			continue
		}
		rec := get(u.owner, u.request)
		rec.Rollbacks = append(rec.Rollbacks, undoRecord{Why: u.why, Since: u.since.UTC(), Groups: sharesToRecord(u.groups),
			LastChance: u.lastChance, CancelOnly: u.cancelOnly})
	}
	out := make(map[string]string, len(byUID))
	for uid, rec := range byUID {
		data, err := json.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("encoding the record of %s: %w", rec.Request, err)
		}
		out[string(uid)] = string(data)
	}
	return out, nil
}

// saveRecords writes the records when they changed since the last write.
// Nothing is written before the records were restored: that would erase
// them.
func (l *Loop) saveRecords(ctx context.Context, r *request, at *attempt) error {
	p := l.p
	if p.store == nil {
		return nil
	}
	if !p.restored {
		return errors.New("the records of the attempts in flight are not restored yet")
	}
	recs, err := l.records(r, at)
	if err != nil {
		return err
	}
	if maps.Equal(recs, p.saved) {
		return nil
	}
	size := 0
	for k, v := range recs {
		size += len(k) + len(v)
	}
	if size > maxRecordsSize {
		return fmt.Errorf("the records of the attempts in flight would take %d bytes, more than the %d a ConfigMap can safely hold",
			size, maxRecordsSize)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.store.Save(wctx, recs); err != nil {
		return fmt.Errorf("writing the records of the attempts in flight: %w", err)
	}
	p.saved = recs
	return nil
}

// maxRecordsSize bounds the records: a ConfigMap holds at most 1 MiB.
const maxRecordsSize = 900 << 10

// restore reads the records once, at the processor's first loop, and gives
// each listed request its attempt and nodes back; the rollbacks of every
// record, and the attempts of requests deleted meanwhile (which are
// cancelled as a deleted request's are), go back to the rollbacks to do.
// A record that cannot be read or is not consistent is logged, reported
// by a Warning event and left out: nothing it names is deleted. p.mu is
// held; the node groups the records name are checked in Run.
func (l *Loop) restore(ctx context.Context, byUID map[types.UID]*request) error {
	p := l.p
	logger := klog.FromContext(ctx)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := p.store.Load(lctx)
	if err != nil {
		return err
	}
	p.restored = true
	p.saved = raw
	claimedBy := map[string]string{} // instance -> the record that claims it first
	keys := sortedKeys(raw)
	for _, key := range keys {
		r := byUID[types.UID(key)]
		rec, err := decodeRecord(raw[key], l.now, claimedBy, key)
		if err == nil && r != nil && r.class != provreq.ClassBestEffortAtomicScaleUp && (rec.Attempt != nil || len(rec.Rollbacks) > 0) {
			err = fmt.Errorf("an all-or-nothing attempt recorded for a request of class %s", r.class)
		}
		if err != nil {
			l.invalidRecord(ctx, key, r, err)
			continue
		}
		name := rec.Request
		if r != nil {
			name = r.state.name
		}
		for _, u := range rec.Rollbacks {
			p.undos = append(p.undos, &undo{why: u.Why, since: u.Since, groups: sharesFromRecord(u.Groups), lastChance: u.LastChance,
				cancelOnly: u.CancelOnly, owner: types.UID(key), request: name, unchecked: true})
		}
		if rec.Attempt != nil {
			at := &attempt{started: rec.Attempt.Started, groups: sharesFromRecord(rec.Attempt.Groups), unchecked: true}
			switch {
			case r == nil:
				// Deleted while no autoscaler watched: cancelled as any
				// deleted request's attempt is.
				logger.Info("Restored the attempt of a ProvisioningRequest deleted meanwhile; cancelling its instances not created yet",
					"provisioningRequest", name)
				p.undos = append(p.undos, &undo{why: "ProvisioningRequest " + name + " was deleted during its scale-up",
					since: l.now, groups: at.groups, cancelOnly: true, owner: types.UID(key), request: name, unchecked: true})
			case r.provisioned():
				// Provisioned before the record caught up: the attempt is
				// over, and nothing of it is rolled back.
				logger.Info("Dropped the restored attempt of a provisioned ProvisioningRequest", "provisioningRequest", klog.KObj(r.pr))
			default:
				r.state.attempt = at
				logger.Info("Restored an all-or-nothing attempt in flight", "provisioningRequest", klog.KObj(r.pr),
					"started", at.started, "groups", describeShares(at.groups))
			}
		}
		if r != nil && len(rec.Nodes) > 0 {
			r.state.nodes = map[string]bool{}
			for _, n := range rec.Nodes {
				r.state.nodes[n] = true
			}
		}
	}
	logger.Info("Restored the records of all-or-nothing attempts", "records", len(raw), "rollbacks", len(p.undos))
	return nil
}

// invalidRecord reports a record left out.
func (l *Loop) invalidRecord(ctx context.Context, key string, r *request, err error) {
	msg := fmt.Sprintf("The record %q of an all-or-nothing attempt is left out, and nothing it names is deleted: %v", key, err)
	klog.FromContext(ctx).Error(err, "Left out an invalid record of an all-or-nothing attempt", "key", key)
	if l.p.recorder == nil {
		return
	}
	if ref := l.p.store.Reference(); ref != nil {
		l.p.recorder.Event(ref, apiv1.EventTypeWarning, ReasonInvalidRecord, msg)
	}
	if r != nil {
		l.p.recorder.Event(reference(r.pr), apiv1.EventTypeWarning, ReasonInvalidRecord, msg)
	}
}

// maxAsked bounds an instance count read from a record.
const maxAsked = 1_000_000

// decodeRecord parses and checks one record. An instance claimed by an
// earlier record (claimedBy) makes it inconsistent; its claims are added
// to claimedBy when it is accepted.
func decodeRecord(data string, now time.Time, claimedBy map[string]string, key string) (*requestRecord, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(data)))
	var rec requestRecord
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("not a record: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a record: text after the JSON document")
	}
	if rec.Version != recordVersion {
		return nil, fmt.Errorf("version %d, want %d", rec.Version, recordVersion)
	}
	var problems []string
	claims := map[string]string{}
	checkShares := func(what string, groups map[string]shareRecord) {
		if len(groups) == 0 {
			problems = append(problems, what+" has no node group")
		}
		for g, sh := range groups {
			where := fmt.Sprintf("%s, node group %q", what, g)
			if g == "" {
				problems = append(problems, what+": a node group without a name")
			}
			if sh.Asked < 0 || sh.Asked > maxAsked {
				problems = append(problems, fmt.Sprintf("%s: asked %d is out of range", where, sh.Asked))
			}
			if len(sh.Claimed) > sh.Asked {
				problems = append(problems, fmt.Sprintf("%s: %d instances claimed, more than the %d asked", where, len(sh.Claimed), sh.Asked))
			}
			before := map[string]bool{}
			for _, id := range sh.Before {
				before[id] = true
			}
			for _, id := range sh.Claimed {
				switch {
				case id == "":
					problems = append(problems, where+": an empty instance id")
				case before[id]:
					problems = append(problems, fmt.Sprintf("%s: instance %s is claimed but was there before the increase", where, id))
				case claims[id] != "" || claimedBy[id] != "":
					problems = append(problems, fmt.Sprintf("%s: instance %s is claimed twice", where, id))
				default:
					claims[id] = g
				}
			}
		}
	}
	if a := rec.Attempt; a != nil {
		if a.Started.IsZero() || a.Started.After(now.Add(time.Minute)) {
			problems = append(problems, fmt.Sprintf("attempt: start time %v is not a past time", a.Started))
		}
		checkShares("attempt", a.Groups)
	}
	for i, u := range rec.Rollbacks {
		if u.Since.IsZero() || u.Since.After(now.Add(time.Minute)) {
			problems = append(problems, fmt.Sprintf("rollback %d: start time %v is not a past time", i, u.Since))
		}
		checkShares(fmt.Sprintf("rollback %d", i), u.Groups)
	}
	for _, n := range rec.Nodes {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("node name %q: %s", n, strings.Join(msgs, "; ")))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, errors.New(strings.Join(problems, "; "))
	}
	for id := range claims {
		claimedBy[id] = key
	}
	return &rec, nil
}

// checkRestored drops, from the attempts and rollbacks restored in this
// loop, the shares of node groups the provider does not know (a record
// edited by hand, or a group gone while no autoscaler ran): nothing can be
// done there. An attempt that lost a share cannot be all-or-nothing any
// more: it is rolled back and the request backs off.
func (l *Loop) checkRestored(ctx context.Context, instances Instances) {
	unknown := func(groups map[string]*share) []string {
		var out []string
		for g := range groups {
			if _, ok := instances.NodeGroup(g); !ok {
				out = append(out, g)
			}
		}
		sort.Strings(out)
		for _, g := range out {
			delete(groups, g)
		}
		return out
	}
	for _, u := range l.p.undos {
		if !u.unchecked {
			continue
		}
		u.unchecked = false
		if gone := unknown(u.groups); len(gone) > 0 {
			l.unknownGroups(ctx, u.request, nil, gone, "its rollback there is dropped")
		}
	}
	for _, r := range l.requests {
		at := r.state.attempt
		if at == nil || !at.unchecked {
			continue
		}
		at.unchecked = false
		gone := unknown(at.groups)
		if len(gone) == 0 {
			continue
		}
		l.unknownGroups(ctx, r.state.name, r, gone, "the attempt is rolled back in the other groups and retried")
		l.abandon(r, fmt.Sprintf("the restored attempt names node groups the cloud provider does not know: %s",
			strings.Join(gone, ", ")))
		retry := l.backOff(r)
		l.set(r, provreq.ConditionProvisioned, false, ReasonRecordInvalid, fmt.Sprintf(
			"The scale-up in flight when the autoscaler restarted named node groups that do not exist (%s); it was rolled back. Next try at %s.",
			strings.Join(gone, ", "), retry.UTC().Format(time.RFC3339)))
	}
}

// ReasonRecordInvalid is the Provisioned=False reason of a request whose
// restored attempt could not be continued.
const ReasonRecordInvalid = "AttemptRecordInvalid"

func (l *Loop) unknownGroups(ctx context.Context, request string, r *request, groups []string, what string) {
	err := fmt.Errorf("node groups %s are unknown to the cloud provider", strings.Join(groups, ", "))
	msg := fmt.Sprintf("The record of ProvisioningRequest %s names node groups the cloud provider does not know (%s): %s.",
		request, strings.Join(groups, ", "), what)
	klog.FromContext(ctx).Error(err, "Restored record names unknown node groups", "provisioningRequest", request, "action", what)
	if l.p.recorder == nil {
		return
	}
	if ref := l.p.store.Reference(); ref != nil {
		l.p.recorder.Event(ref, apiv1.EventTypeWarning, ReasonInvalidRecord, msg)
	}
	if r != nil {
		l.p.recorder.Event(reference(r.pr), apiv1.EventTypeWarning, ReasonInvalidRecord, msg)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// attemptFromPlan is the attempt ScaleUpAll is about to make.
func attemptFromPlan(planned []scaleup.Planned, now time.Time) *attempt {
	at := &attempt{groups: map[string]*share{}, started: now}
	for _, pl := range planned {
		at.groups[pl.NodeGroup] = newShare(pl.To-pl.From, pl.Before, nil)
	}
	return at
}
