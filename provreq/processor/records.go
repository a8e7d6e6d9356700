package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
// the group listed before the increase, those the leader that made the
// increase attributed to it since (claimed: the only ones a rollback
// deletes), those a later leader counted for its progress (adopted: never
// deleted), and the claimed ones a rollback kept because their nodes run
// other pods, with why.
type shareRecord struct {
	Asked   int               `json:"asked"`
	Before  []string          `json:"before,omitempty"`
	Claimed []string          `json:"claimed,omitempty"`
	Adopted []string          `json:"adopted,omitempty"`
	Kept    map[string]string `json:"kept,omitempty"`
}

type undoRecord struct {
	Why        string                 `json:"why"`
	Since      time.Time              `json:"since"`
	Groups     map[string]shareRecord `json:"groups"`
	LastChance bool                   `json:"lastChance,omitempty"`
	CancelOnly bool                   `json:"cancelOnly,omitempty"`
	// Failed is when the rollback was given up; a failed rollback is on
	// record for people only: nothing more is done for it.
	Failed time.Time `json:"failed,omitzero"`
}

func shareToRecord(sh *share) shareRecord {
	r := shareRecord{Asked: sh.asked, Claimed: append([]string(nil), sh.claimed...),
		Adopted: append([]string(nil), sh.adopted...), Kept: maps.Clone(sh.kept)}
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
		sh := &share{asked: r.Asked, before: make(map[string]bool, len(r.Before)), claimed: append([]string(nil), r.Claimed...),
			adopted: append([]string(nil), r.Adopted...), kept: maps.Clone(r.Kept), restored: true}
		for _, id := range r.Before {
			sh.before[id] = true
		}
		out[g] = sh
	}
	return out
}

// records is what the store should hold now: one record per request with
// an attempt in flight, a rollback to finish or given up, or provisioned
// nodes. attempt, when not nil, is taken as r's attempt (the one about to
// be made). finished are, by key, the records that hold nothing to do (no
// attempt, no rollback to finish) with when they finished: those may be
// dropped to bound the records' size.
func (l *Loop) records(r *request, at *attempt) (out map[string]string, finished map[string]time.Time, err error) {
	byUID := map[types.UID]*requestRecord{}
	done := map[types.UID]time.Time{}
	get := func(uid types.UID, name string) *requestRecord {
		rec := byUID[uid]
		if rec == nil {
			rec = &requestRecord{Version: recordVersion, Request: name}
			byUID[uid] = rec
		}
		return rec
	}
	later := func(uid types.UID, t time.Time) {
		if t.After(done[uid]) {
			done[uid] = t
		}
	}
	for _, q := range l.requests {
		a := q.state.attempt
		if q == r {
			a = at
		}
		if a != nil {
			get(q.pr.UID, q.state.name).Attempt = &attemptRecord{Started: a.started.UTC(), Groups: sharesToRecord(a.groups)}
		}
		if len(q.state.nodes) > 0 && (q.provisioned() || l.runLimited(q)) {
			rec := get(q.pr.UID, q.state.name)
			rec.Nodes = sortedKeys(q.state.nodes)
			if c := provreq.FindCondition(q.status.Conditions, provreq.ConditionProvisioned); c != nil {
				later(q.pr.UID, c.LastTransitionTime.Time)
			}
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
	for _, u := range l.p.failed {
		rec := get(u.owner, u.request)
		rec.Rollbacks = append(rec.Rollbacks, undoRecord{Why: u.why, Since: u.since.UTC(), Groups: sharesToRecord(u.groups),
			Failed: u.failedAt.UTC()})
		later(u.owner, u.failedAt)
	}
	out = make(map[string]string, len(byUID))
	finished = map[string]time.Time{}
	for uid, rec := range byUID {
		data, err := json.Marshal(rec)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding the record of %s: %w", rec.Request, err)
		}
		out[string(uid)] = string(data)
		if rec.Attempt == nil && !slices.ContainsFunc(rec.Rollbacks, func(u undoRecord) bool { return u.Failed.IsZero() }) {
			finished[string(uid)] = done[uid]
		}
	}
	return out, finished, nil
}

// bound drops finished records, oldest first, until the records take at
// most limit bytes, and returns how many it dropped; an error when they
// still take more.
func bound(recs map[string]string, finished map[string]time.Time, limit int) (int, error) {
	size := 0
	for k, v := range recs {
		size += len(k) + len(v)
	}
	keys := sortedKeys(finished)
	sort.SliceStable(keys, func(i, j int) bool { return finished[keys[i]].Before(finished[keys[j]]) })
	dropped := 0
	for _, k := range keys {
		if size <= limit {
			break
		}
		size -= len(k) + len(recs[k])
		delete(recs, k)
		dropped++
	}
	if size > limit {
		return dropped, fmt.Errorf("the records of the attempts in flight would take %d bytes, more than the %d a ConfigMap can safely hold",
			size, limit)
	}
	return dropped, nil
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
	recs, finished, err := l.records(r, at)
	if err != nil {
		return err
	}
	dropped, err := bound(recs, finished, p.maxRecordsSize)
	if err != nil {
		return err
	}
	if maps.Equal(recs, p.saved) {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.store.Save(wctx, recs); err != nil {
		return fmt.Errorf("writing the records of the attempts in flight: %w", err)
	}
	if dropped > 0 {
		klog.FromContext(ctx).Info("Left the oldest finished records out of the attempt records to keep them under their size limit",
			"dropped", dropped, "limit", p.maxRecordsSize)
	}
	p.saved = recs
	return nil
}

// MaxRecordsSize bounds the records (keys and values, in bytes): a
// ConfigMap holds at most 1 MiB.
const MaxRecordsSize = 900 << 10

// restore reads the records once, at the processor's first loop, and gives
// each listed request its attempt and nodes back, and the rollbacks to do
// back to the rollbacks. What another leader wrote is trusted only as far
// as it is safe to act on: a record that cannot be read or is not
// consistent, one whose request is gone (or was recreated: another UID),
// and an attempt or rollback older than --max-node-provision-time plus
// staleRecordMargin (its leader would have ended it long ago) roll back
// nothing: they are logged, reported by a Warning event on the records'
// object (and the request, when it exists) and dropped. p.mu is held; the
// node groups the records name are checked in Run.
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
	byName := map[string]*request{}
	for _, r := range l.requests {
		byName[r.state.name] = r
	}
	claimedBy := map[string]string{} // instance -> the record that claims it first
	keys := sortedKeys(raw)
	for _, key := range keys {
		r := byUID[types.UID(key)]
		rec, err := decodeRecord(raw[key], l.now, claimedBy, key)
		switch {
		case err != nil:
		case r == nil:
			l.orphanedRecord(ctx, key, rec, byName[rec.Request])
			continue
		case r.state.name != rec.Request:
			err = fmt.Errorf("it names request %s, but the request of UID %s is %s", rec.Request, key, r.state.name)
		case r.class != provreq.ClassBestEffortAtomicScaleUp && (rec.Attempt != nil || len(rec.Rollbacks) > 0):
			err = fmt.Errorf("an all-or-nothing attempt recorded for a request of class %s", r.class)
		}
		if err != nil {
			l.invalidRecord(ctx, key, r, err)
			continue
		}
		l.restoreRecord(ctx, key, rec, r)
	}
	logger.Info("Restored the records of all-or-nothing attempts", "records", len(raw), "rollbacks", len(p.undos))
	return nil
}

// staleRecordMargin is how much older than --max-node-provision-time an
// attempt or a rollback on record may be and still be acted on.
const staleRecordMargin = 5 * time.Minute

// restoreRecord gives r, which exists, what its valid record holds.
func (l *Loop) restoreRecord(ctx context.Context, key string, rec *requestRecord, r *request) {
	p := l.p
	logger := klog.FromContext(ctx)
	stale := l.now.Add(-(p.opts.MaxNodeProvisionTime + staleRecordMargin))
	var old []string
	if a := rec.Attempt; a != nil {
		at := &attempt{started: a.Started, groups: sharesFromRecord(a.Groups), unchecked: true}
		switch {
		case r.provisioned():
			// Provisioned before the record caught up: the attempt is
			// over, and nothing of it is rolled back.
			logger.Info("Dropped the restored attempt of a provisioned ProvisioningRequest", "provisioningRequest", klog.KObj(r.pr))
		case a.Started.Before(stale):
			old = append(old, fmt.Sprintf("the attempt (started %s)", a.Started.UTC().Format(time.RFC3339)))
		default:
			r.state.attempt = at
			logger.Info("Restored an all-or-nothing attempt in flight", "provisioningRequest", klog.KObj(r.pr),
				"started", at.started, "groups", describeShares(at.groups))
		}
	}
	for i, u := range rec.Rollbacks {
		switch {
		case !u.Failed.IsZero():
			if l.now.Sub(u.Failed) <= failedRollbackRetention {
				p.failed = append(p.failed, &undo{why: u.Why, since: u.Since, groups: sharesFromRecord(u.Groups),
					owner: types.UID(key), request: r.state.name, failedAt: u.Failed})
			}
		case u.Since.Before(stale):
			old = append(old, fmt.Sprintf("rollback %d (since %s)", i, u.Since.UTC().Format(time.RFC3339)))
		default:
			p.undos = append(p.undos, &undo{why: u.Why, since: u.Since, groups: sharesFromRecord(u.Groups), lastChance: u.LastChance,
				cancelOnly: u.CancelOnly, owner: types.UID(key), request: r.state.name, unchecked: true})
		}
	}
	if len(old) > 0 {
		msg := fmt.Sprintf("The record of ProvisioningRequest %s holds %s older than --max-node-provision-time (%v) plus %v: "+
			"dropped, and nothing it names is deleted or cancelled.", r.state.name, strings.Join(old, ", "),
			p.opts.MaxNodeProvisionTime, staleRecordMargin)
		logger.Info("Dropped a stale record of an all-or-nothing attempt; nothing it names is rolled back",
			"provisioningRequest", klog.KObj(r.pr), "dropped", old)
		l.warn(r.pr.UID, ReasonStaleRecord, msg)
	}
	if len(rec.Nodes) > 0 {
		r.state.nodes = map[string]bool{}
		for _, n := range rec.Nodes {
			r.state.nodes[n] = true
		}
	}
}

// orphanedRecord drops the record of a request that is gone: a new
// request of the same name (recreated) is another request. What it names
// is not rolled back; the instances it made are left to scale-down and
// the cleanup.
func (l *Loop) orphanedRecord(ctx context.Context, key string, rec *requestRecord, sameName *request) {
	active := rec.Attempt != nil
	for _, u := range rec.Rollbacks {
		active = active || u.Failed.IsZero()
	}
	why := "the request no longer exists"
	if sameName != nil {
		why = fmt.Sprintf("the request was recreated (its UID is now %s)", sameName.pr.UID)
	}
	logger := klog.FromContext(ctx)
	if !active {
		logger.V(2).Info("Dropped the record of a finished ProvisioningRequest that is gone", "key", key, "provisioningRequest", rec.Request)
		return
	}
	logger.Info("Dropped the record of an all-or-nothing attempt whose request is gone; nothing it names is rolled back",
		"key", key, "provisioningRequest", rec.Request, "why", why)
	l.warn("", ReasonOrphanedRecord, fmt.Sprintf("The record %q of ProvisioningRequest %s is dropped, and nothing it names is deleted "+
		"or cancelled: %s. Its instances are left to scale-down and the cleanup.", key, rec.Request, why))
}

// Reasons of the Warning events about records dropped.
const (
	// ReasonStaleRecord: an attempt or rollback on record is too old to act on.
	ReasonStaleRecord = "StaleAttemptRecord"
	// ReasonOrphanedRecord: the record's request is gone or was recreated.
	ReasonOrphanedRecord = "OrphanedAttemptRecord"
)

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
