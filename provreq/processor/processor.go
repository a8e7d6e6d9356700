package processor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// Options are the processor's settings, from the flags.
type Options struct {
	// BookingTime is how long provisioned capacity stays reserved.
	BookingTime time.Duration
	// TemplateGracePeriod is how long a missing PodTemplate is waited for.
	TemplateGracePeriod time.Duration
	// ExpiryTime fails requests not provisioned this long after creation.
	ExpiryTime time.Duration
	// RetentionTime deletes requests this long after they reached a final state.
	RetentionTime time.Duration
	// InitialBackoff and MaxBackoff bound the retries of a request.
	InitialBackoff, MaxBackoff time.Duration
	// MaxBackoffEntries caps the remembered retry states.
	MaxBackoffEntries int
	// ProcessorInstance is --check-capacity-processor-instance.
	ProcessorInstance string
	// CheckCapacityTimebox bounds the time spent on check-capacity requests per loop.
	CheckCapacityTimebox time.Duration
	// CheckCapacityMaxPerLoop caps the check-capacity requests answered per
	// loop (--check-capacity-provisioning-request-max-batch-size with
	// --check-capacity-batch-processing); 0 means no cap.
	CheckCapacityMaxPerLoop int
	// MaxNodeProvisionTime bounds how long an atomic attempt's instances may
	// take to register before the attempt is rolled back.
	MaxNodeProvisionTime time.Duration
	// MaxNodeStartupTime is how long a registered node may take to be ready.
	MaxNodeStartupTime time.Duration
	// MaxPodsPerRequest caps the pods of one request (the sum of its
	// PodSets' counts); a request above it fails without its pods ever
	// being built. Zero means no cap.
	MaxPodsPerRequest int
	// MaxRunGrace is how long the nodes of a request whose
	// maxRunDurationSeconds passed wait for its pods to go before they are
	// drained all the same (--provisioning-request-max-run-grace).
	MaxRunGrace time.Duration
}

// RequestLister lists the ProvisioningRequests of the informer cache.
type RequestLister interface {
	List(selector labels.Selector) ([]*v1.ProvisioningRequest, error)
}

// StatusWriter writes a request's status (the autoscaler's conditions and
// class details) and deletes requests.
type StatusWriter interface {
	ApplyStatus(ctx context.Context, namespace, name string, status v1.ProvisioningRequestStatus) error
	Delete(ctx context.Context, namespace, name string, uid types.UID) error
}

// Capacity is the loop's scale-up session: what the processor places or
// scales is held in the same snapshot as the ordinary scale-up.
// Place and FitAll take the request's pods PodSet by PodSet: the pods of
// one PodSet are equivalent by construction, and are placed as one group.
// FitAll's refusal, when not all fit, is why the first pod left fits no
// node, bounded in length, for a condition message ("" when unknown).
type Capacity interface {
	Place(ctx context.Context, sets [][]*apiv1.Pod, realOnly bool) []*apiv1.Pod
	FitAll(ctx context.Context, sets [][]*apiv1.Pod, realOnly bool) (fit bool, refusal string)
	ScaleUpAll(ctx context.Context, pods []*apiv1.Pod, record scaleup.RecordFunc) scaleup.AtomicResult
}

// Processor keeps the per-request state between loops. One loop uses it at
// a time.
type Processor struct {
	opts      Options
	requests  RequestLister
	templates TemplateGetter
	status    StatusWriter
	recorder  record.EventRecorder
	rollback  RollbackFunc
	metrics   Metrics
	// clock times the check-capacity timebox (wall time, not the loop's now).
	clock clock.PassiveClock
	// explain, when set, keeps the conditions each loop sets (WithExplainer).
	explain *explain.Recorder
	// ending, when set, names the nodes whose reserved capacity ends soon
	// (WithEndingCapacity; blockend.go).
	ending EndingNodes

	mu     sync.Mutex
	states map[types.UID]*requestState
	// undos are rollbacks of abandoned attempts still to do or finish.
	undos []*undo
	// attributed are, by node group, the instances any share ever claimed.
	// They stay taken once their attempt is over, Provisioned ones
	// included: a share whose before-set lacks them (the cloud listed them
	// after its increase) must not claim them again. An id is forgotten
	// once its group no longer lists it.
	attributed map[string]map[string]bool
	// failed are rollbacks given up, kept on record for a while: nothing
	// more is done for them.
	failed []*undo

	// store keeps the attempts, rollbacks and provisioned nodes for the
	// next leader (nil: memory only); restored is set once they were read
	// back, saved is what it holds as last written or read.
	store    RecordStore
	restored bool
	saved    map[string]string
	// maxRecordsSize bounds what store holds (MaxRecordsSize).
	maxRecordsSize int

	// waiting is WaitingForNodes's answer, as the loop last published it.
	waiting atomic.Bool
	// holds and holdsKnown are Holds's answer, as the loop last published
	// it (publishHolds).
	holdsMu    sync.Mutex
	holds      map[string]string
	holdsKnown bool
	// releases is RunReleases's answer, as the loop last published it
	// (publishRunLimits), under holdsMu.
	releases map[string]Release
}

// requestState is what the processor remembers of one request.
type requestState struct {
	name         string    // namespace/name, for the logs once it is gone
	seen         time.Time // last loop that saw the request
	retryAt      time.Time
	backoff      time.Duration
	missingSince time.Time
	attempt      *attempt
	// nodes are the provisioned nodes of an atomic request, by name.
	nodes map[string]bool
	// bookedOn are the nodes a check-capacity request's booking was placed
	// on in the last loop that placed it (kept in memory only): a node
	// whose reserved capacity ends is cordoned for its drain, and the next
	// placement no longer shows the booking there.
	bookedOn []string
	// built are the request's pods, kept while it is live.
	built *builtPods
	// written is the status last written, at writtenAt: until the informer
	// shows it (for at most staleStatusLimit), the loop starts from it, not
	// from the informer's older status (a request provisioned in one loop
	// would otherwise be decided again in the next).
	written   *v1.ProvisioningRequestStatus
	writtenAt time.Time
}

// staleStatusLimit bounds how long a written status stands in for the
// informer's: the autoscaler owns these conditions, so a status that
// differs for longer was changed by someone (reset by hand), and counts.
const staleStatusLimit = 30 * time.Second

// Option configures a Processor.
type Option func(*Processor)

// WithEventRecorder records an event on the request for each transition.
func WithEventRecorder(r record.EventRecorder) Option { return func(p *Processor) { p.recorder = r } }

// WithExplainer records, in each loop, the conditions set on each request
// for the explainer (/explainz?provisioningrequest=...).
func WithExplainer(r *explain.Recorder) Option { return func(p *Processor) { p.explain = r } }

// WithClock replaces the real clock that times the check-capacity timebox.
func WithClock(c clock.PassiveClock) Option { return func(p *Processor) { p.clock = c } }

// WithMetrics exports the requests' metrics.
func WithMetrics(m Metrics) Option { return func(p *Processor) { p.metrics = m } }

// New builds a processor.
func New(opts Options, requests RequestLister, templates TemplateGetter, status StatusWriter, rollback RollbackFunc,
	options ...Option) *Processor {
	p := &Processor{opts: opts, requests: requests, templates: templates, status: status, rollback: rollback,
		metrics: nopMetrics{}, clock: clock.RealClock{}, states: map[types.UID]*requestState{},
		attributed: map[string]map[string]bool{}, maxRecordsSize: MaxRecordsSize}
	for _, o := range options {
		o(p)
	}
	return p
}

// request is one request in one loop.
type request struct {
	pr     *v1.ProvisioningRequest
	class  string
	state  *requestState
	pods   []*apiv1.Pod
	sets   [][]*apiv1.Pod               // pods, PodSet by PodSet
	status v1.ProvisioningRequestStatus // what it should be at the end of the loop
	// base is the status the loop started from (the informer's, or the
	// one written last while the informer has not seen it): written only
	// when status ends otherwise.
	base   v1.ProvisioningRequestStatus
	events []event
	// consumers are the request's consuming pods: scheduled and pending.
	scheduled, pending int
	// booked counts the pods whose capacity this loop holds for the
	// request (the booked-pods gauge counts it while it is provisioned).
	booked int
	// attemptNodes are the registered nodes of its attempt in flight at
	// the end of Run (Holds).
	attemptNodes []string
}

type event struct{ kind, reason, message string }

// Loop is the processor's view of one loop.
type Loop struct {
	p        *Processor
	now      time.Time
	requests []*request
	setAside map[*apiv1.Pod]bool
	pending  []*apiv1.Pod
	released []*apiv1.Pod // consuming pods of a request that is not live
	consumer []*apiv1.Pod // the pods set aside, in the order seen
	foreign  int          // pods set aside for requests another instance or controller handles
	// rolledBack: this loop asked the provider to delete or cancel the
	// capacity of abandoned attempts, which its snapshot still holds.
	rolledBack bool
	// endingNodes is the processor's EndingNodes, read once in the loop.
	endingNodes map[string]EndingCapacity
	// unrestored: the records could not be read in this loop; nothing that
	// depends on them (atomic scale-ups, rollbacks, their records) is done.
	unrestored bool
	// blind: the requests could not be listed in this loop (Holds stays
	// unknown).
	blind bool
	// present are the cluster's nodes as Run saw them (nil: Run did not
	// run in this loop).
	present map[string]bool
}

// Input is what the processor needs of the loop's observation.
type Input struct {
	Now           time.Time
	ScheduledPods []*apiv1.Pod
	PendingPods   []*apiv1.Pod
}

// Begin reads the requests, moves their lifecycle on (accepted, expired,
// booking over, garbage collected), and decides which pending pods are set
// aside because they consume a live request.
func (p *Processor) Begin(ctx context.Context, in Input) *Loop {
	logger := klog.FromContext(ctx)
	l := &Loop{p: p, now: in.Now, setAside: map[*apiv1.Pod]bool{}}
	all, err := p.requests.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing ProvisioningRequests; none handled this loop")
		l.pending = in.PendingPods
		l.blind = true
		return l
	}
	// Oldest first, then by namespace and name: fair and deterministic.
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	byName := map[string]*request{}
	byUID := map[types.UID]*request{}
	// Requests of another class, or for another processor instance, are
	// someone else's: never touched, but their consuming pods are theirs.
	foreign := map[string]bool{}
	p.mu.Lock()
	for _, pr := range all {
		class, ok := provreq.NormalizeClass(pr.Spec.ProvisioningClassName)
		if !ok || !p.handles(pr, class) {
			if !provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionFailed) {
				foreign[pr.Namespace+"/"+pr.Name] = true
			}
			continue // not ours: no condition, no event
		}
		st := p.states[pr.UID]
		if st == nil {
			st = &requestState{name: pr.Namespace + "/" + pr.Name}
			p.states[pr.UID] = st
		}
		st.seen = in.Now
		base := *ownStatus(pr)
		switch {
		case st.written == nil:
		case equality.Semantic.DeepEqual(base, *st.written) || in.Now.Sub(st.writtenAt) > staleStatusLimit:
			st.written = nil // seen, or overwritten by someone
		default:
			base = *st.written.DeepCopy() // the informer has not seen the write yet
		}
		r := &request{pr: pr, class: class, state: st, status: *base.DeepCopy(), base: base}
		l.requests = append(l.requests, r)
		byName[pr.Namespace+"/"+pr.Name] = r
		byUID[pr.UID] = r
	}
	if p.store != nil && !p.restored {
		if err := l.restore(ctx, byUID); err != nil {
			logger.Error(err, "Reading the records of the all-or-nothing attempts in flight; no atomic scale-up or rollback in this loop")
			l.unrestored = true
		}
	}
	l.forgetGone(ctx)
	p.publishWaiting()
	p.mu.Unlock()

	// Consuming pods: count them per request, set aside the pending ones of
	// live requests.
	for _, pod := range in.ScheduledPods {
		if name, ok := provreq.ConsumedRequestName(pod); ok {
			if r := byName[pod.Namespace+"/"+name]; r != nil {
				r.scheduled++
			}
		}
	}
	for _, pod := range in.PendingPods {
		name, ok := provreq.ConsumedRequestName(pod)
		if !ok {
			l.pending = append(l.pending, pod)
			continue
		}
		r := byName[pod.Namespace+"/"+name]
		if r != nil && r.live() {
			r.pending++
			l.setAside[pod] = true
			l.consumer = append(l.consumer, pod)
			continue
		}
		if foreign[pod.Namespace+"/"+name] {
			// Another autoscaler instance or another controller provisions
			// for it: scaling up for the pod here would provision twice.
			l.foreign++
			l.setAside[pod] = true
			l.consumer = append(l.consumer, pod)
			logger.V(4).Info("Pod consumes a ProvisioningRequest handled elsewhere; it does not trigger a scale-up",
				"pod", klog.KObj(pod), "provisioningRequest", klog.KRef(pod.Namespace, name))
			continue
		}
		l.released = append(l.released, pod)
		l.pending = append(l.pending, pod)
	}
	for _, r := range l.requests {
		l.lifecycle(ctx, r)
	}
	return l
}

// WaitingForNodes reports whether an all-or-nothing attempt is waiting for
// its new nodes to register (or turn Ready): a node joining may then make a
// request Provisioned, and is worth a loop at once. Safe to call from any
// goroutine: it reads what the loop last published, not the states the
// loop is changing.
func (p *Processor) WaitingForNodes() bool { return p.waiting.Load() }

// publishWaiting sets what WaitingForNodes answers; the loop's goroutine
// calls it once the attempts may have changed.
func (p *Processor) publishWaiting() {
	for _, st := range p.states {
		if st.attempt != nil {
			p.waiting.Store(true)
			return
		}
	}
	p.waiting.Store(false)
}

// handles applies --check-capacity-processor-instance: an instance with a
// name handles only check-capacity requests that name it; one without
// handles every request that names no instance.
func (p *Processor) handles(pr *v1.ProvisioningRequest, class string) bool {
	instance := provreq.ProcessorInstance(pr.Spec.Parameters)
	if p.opts.ProcessorInstance != "" {
		return class == provreq.ClassCheckCapacity && instance == p.opts.ProcessorInstance
	}
	return instance == ""
}

// forgetGone drops the state of requests that are gone, rolling back the
// attempt a deleted request had in flight; p.mu is held.
func (l *Loop) forgetGone(ctx context.Context) {
	p, now := l.p, l.now
	for uid, st := range p.states {
		if !st.seen.Equal(now) {
			if st.attempt != nil {
				// The job is gone: what the cloud has not created yet is
				// cancelled (once no pending pod may need it); what it
				// created is left to scale-down, or to the cleanup if it
				// never registers.
				klog.FromContext(ctx).Info("ProvisioningRequest deleted during its scale-up; cancelling the instances not created yet",
					"provisioningRequest", st.name)
				p.undos = append(p.undos, &undo{why: "ProvisioningRequest " + st.name + " was deleted during its scale-up",
					since: now, groups: st.attempt.groups, cancelOnly: true, owner: uid, request: st.name,
					unchecked: st.attempt.unchecked})
			}
			delete(p.states, uid)
		}
	}
	if over := len(p.states) - p.opts.MaxBackoffEntries; over > 0 && p.opts.MaxBackoffEntries > 0 {
		// --provisioning-request-max-backoff-cache-size: beyond it, the
		// retry states that hold nothing but a back-off are dropped.
		var old []types.UID
		for uid, st := range p.states {
			if st.attempt == nil && st.nodes == nil && st.missingSince.IsZero() {
				old = append(old, uid)
			}
		}
		for _, uid := range old[:min(over, len(old))] {
			delete(p.states, uid)
		}
	}
}

// Pending are the pending pods for the ordinary scale-up: those that
// consume a live request are left out.
func (l *Loop) Pending() []*apiv1.Pod { return l.pending }

// SetAside reports whether pod was left out because it consumes a live request.
func (l *Loop) SetAside(pod *apiv1.Pod) bool { return l.setAside[pod] }

// live: accepted work that is neither failed nor over.
func (r *request) live() bool {
	c := r.status.Conditions
	return !provreq.IsConditionTrue(c, provreq.ConditionFailed) &&
		!provreq.IsConditionTrue(c, provreq.ConditionBookingExpired) &&
		!provreq.IsConditionTrue(c, provreq.ConditionCapacityRevoked)
}

func (r *request) provisioned() bool {
	return r.live() && provreq.IsConditionTrue(r.status.Conditions, provreq.ConditionProvisioned)
}

func (r *request) total() int {
	n := 0
	for _, ps := range r.pr.Spec.PodSets {
		n += int(ps.Count)
	}
	return n
}

// set changes one of the request's conditions and records the transition.
func (l *Loop) set(r *request, typ string, status bool, reason, message string) {
	s := "False"
	if status {
		s = "True"
	}
	l.p.explain.SetCondition(r.pr.Namespace+"/"+r.pr.Name, explain.Condition{Type: typ, Status: s, Reason: reason,
		Message: message})
	// A copy: SetCondition updates the condition in place, so a pointer
	// into the slice would read the new values and hide the transition.
	var old *metav1.Condition
	if found := provreq.FindCondition(r.status.Conditions, typ); found != nil {
		prev := *found
		old = &prev
	}
	if old != nil && string(old.Status) == s && old.Reason == reason && old.Message == message {
		return
	}
	if typ == provreq.ConditionProvisioned && status && (old == nil || string(old.Status) != s) {
		message += l.runLimitNote(r)
	}
	c := condition(typ, s, reason, message, r.pr.Generation)
	provreq.SetCondition(&r.status.Conditions, c, l.now)
	if old == nil || string(old.Status) != s || old.Reason != reason {
		kind := apiv1.EventTypeNormal
		if (typ == provreq.ConditionFailed || typ == provreq.ConditionCapacityRevoked) && status {
			kind = apiv1.EventTypeWarning
		}
		r.events = append(r.events, event{kind: kind, reason: typ + reason, message: message})
		l.p.metrics.Transition(r.class, typ, s, reason, l.now.Sub(r.pr.CreationTimestamp.Time))
	}
}

// fail ends the request with Failed=True; an attempt in flight is rolled
// back.
func (l *Loop) fail(r *request, reason, message string) {
	l.set(r, provreq.ConditionFailed, true, reason, message)
	l.abandon(r, "the request failed: "+message)
}

// backOff schedules the request's next try and returns when it is.
func (l *Loop) backOff(r *request) time.Time {
	st := r.state
	if st.backoff == 0 {
		st.backoff = l.p.opts.InitialBackoff
	} else {
		st.backoff = min(2*st.backoff, l.p.opts.MaxBackoff)
	}
	st.retryAt = l.now.Add(st.backoff)
	return st.retryAt
}

// lifecycle moves a request on by time and by what is known before any
// simulation: garbage collection, expiry, ValidUntilSeconds, acceptance,
// templates, booking end.
func (l *Loop) lifecycle(ctx context.Context, r *request) {
	pr, opts := r.pr, l.p.opts
	l.enforceRunLimit(r)
	l.revokeEnding(r)
	if !r.live() {
		r.state.built = nil
		if last := lastTransition(r.status.Conditions); !last.IsZero() && l.now.Sub(last) > opts.RetentionTime {
			if err := l.p.status.Delete(ctx, pr.Namespace, pr.Name, pr.UID); err != nil {
				klog.FromContext(ctx).Error(err, "Deleting a finished ProvisioningRequest", "provisioningRequest", klog.KObj(pr))
			} else {
				klog.FromContext(ctx).Info("Deleted a finished ProvisioningRequest after its retention time",
					"provisioningRequest", klog.KObj(pr), "retention", opts.RetentionTime)
			}
		}
		return
	}
	age := l.now.Sub(pr.CreationTimestamp.Time)
	if !r.provisioned() {
		if age > opts.ExpiryTime {
			l.fail(r, provreq.ReasonExpired, fmt.Sprintf("The capacity was not provisioned within %v of the request's creation.", opts.ExpiryTime))
			return
		}
		deadline, set, err := provreq.ValidUntil(pr)
		if err != nil {
			l.fail(r, ReasonInvalidParameters, fmt.Sprintf("Invalid parameters: %v.", err))
			return
		}
		if _, _, err := provreq.ParseMaxRunDurationSeconds(pr.Spec.Parameters); err != nil {
			l.fail(r, ReasonInvalidParameters, fmt.Sprintf("Invalid parameters: %v.", err))
			return
		}
		if err := checkBoolParameters(pr.Spec.Parameters); err != nil {
			l.fail(r, ReasonInvalidParameters, fmt.Sprintf("Invalid parameters: %v.", err))
			return
		}
		if set && l.now.After(deadline) && r.state.attempt == nil {
			l.fail(r, provreq.ReasonExpired, fmt.Sprintf(
				"ValidUntilSeconds passed (%v after creation) before the capacity was provisioned; no more retries.",
				deadline.Sub(pr.CreationTimestamp.Time)))
			return
		}
	}
	if err := provreq.ValidatePodSets(pr.Spec.PodSets); err != nil {
		// Before the pod cap: a negative count would hide a huge one from it.
		l.fail(r, ReasonInvalidPodSets, fmt.Sprintf("Invalid PodSets: %v.", err))
		return
	}
	if total := r.total(); opts.MaxPodsPerRequest > 0 && total > opts.MaxPodsPerRequest {
		if r.provisioned() {
			// Provisioned before the cap was lowered: its nodes are there,
			// but its pods are not built to book them.
			klog.FromContext(ctx).Info("Not booking a provisioned ProvisioningRequest above the pod cap",
				"provisioningRequest", klog.KObj(pr), "pods", total, "maxPodsPerProvisioningRequest", opts.MaxPodsPerRequest)
			return
		}
		l.fail(r, ReasonTooManyPods, fmt.Sprintf(
			"The request asks for %d pods, more than the %d one request may ask for (--max-pods-per-provisioning-request); split it into smaller requests.",
			total, opts.MaxPodsPerRequest))
		return
	}
	if !provreq.IsConditionTrue(r.status.Conditions, provreq.ConditionAccepted) {
		l.set(r, provreq.ConditionAccepted, true, provreq.ReasonAccepted, "The cluster autoscaler is working on the request.")
	}

	sets, missing := podsOf(pr, r.class, l.p.templates, r.state)
	if len(missing) > 0 {
		if r.state.missingSince.IsZero() {
			r.state.missingSince = l.now
		}
		waited := l.now.Sub(r.state.missingSince)
		msg := fmt.Sprintf("%d of %d PodTemplates are missing: %s.", len(missing), len(pr.Spec.PodSets), strings.Join(missing, ", "))
		if waited >= opts.TemplateGracePeriod {
			l.fail(r, provreq.ReasonFailedToCreatePods, msg+fmt.Sprintf(" Waited %v for them.", opts.TemplateGracePeriod))
			return
		}
		if !r.provisioned() {
			l.set(r, provreq.ConditionProvisioned, false, ReasonWaitingForPodTemplates, msg+" Waiting for them to appear.")
		}
		return
	}
	r.state.missingSince = time.Time{}
	r.sets = sets
	r.pods = flatten(sets)

	if r.provisioned() {
		since := provreq.FindCondition(r.status.Conditions, provreq.ConditionProvisioned).LastTransitionTime.Time
		switch {
		case r.scheduled >= r.total():
			l.set(r, provreq.ConditionBookingExpired, true, provreq.ReasonCapacityBookingConsumed,
				fmt.Sprintf("All %d pods consuming the request are scheduled.", r.total()))
		case l.now.Sub(since) > opts.BookingTime:
			l.set(r, provreq.ConditionBookingExpired, true, provreq.ReasonCapacityReservationTimeExpired,
				fmt.Sprintf("The capacity was reserved for %v after it was provisioned; %d of %d pods consumed it.",
					opts.BookingTime, r.scheduled, r.total()))
		}
	}
}

// checkBoolParameters reports the first boolean parameter whose value is
// not a boolean.
func checkBoolParameters(params map[string]v1.Parameter) error {
	for _, key := range []string{provreq.ParamNoRetry, ParamWaitForReadyNodes} {
		if _, err := provreq.ParseBoolParameter(params, key); err != nil {
			return err
		}
	}
	return nil
}

// lastTransition is the latest transition of the request's conditions.
func lastTransition(conds []metav1.Condition) time.Time {
	var last time.Time
	for _, c := range conds {
		if c.LastTransitionTime.After(last) {
			last = c.LastTransitionTime.Time
		}
	}
	return last
}
