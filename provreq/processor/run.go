package processor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// Reasons and parameters of our own, beyond upstream's vocabulary.
const (
	ReasonInvalidParameters      = "InvalidParameters"
	ReasonWaitingForPodTemplates = "WaitingForPodTemplates"
	ReasonProvisioningInProgress = "ProvisioningInProgress"
	ReasonCapacityCanNeverFit    = "CapacityCanNeverFit"
	ReasonNodeGroupsGone         = "NodeGroupsGone"
	ReasonCapacityLost           = "CapacityLost"
	ReasonTooManyPods            = "TooManyPods"
	ReasonInvalidPodSets         = "InvalidPodSets"
	ReasonWaitingForUpcoming     = "WaitingForUpcomingNodes"

	// ParamWaitForReadyNodes ("true" or "false", strconv.ParseBool's
	// spellings) makes an atomic request Provisioned only once its new
	// nodes are Ready, not as soon as they registered.
	ParamWaitForReadyNodes = "waitForReadyNodes"
	// DetailNodeGroups names the node groups an atomic request was given.
	DetailNodeGroups = "nodeGroups"
)

// HasWork reports whether any request needs the loop's simulation, or an
// attempt in flight or a rollback needs Run.
func (l *Loop) HasWork() bool {
	if len(l.p.undos) > 0 {
		return true
	}
	for _, r := range l.requests {
		if (r.live() && r.pods != nil) || r.state.attempt != nil {
			return true
		}
	}
	return false
}

// Run books the capacity of provisioned requests, then answers
// check-capacity requests and scales atomic ones, oldest first, all in the
// loop's session. nodes are the cluster's nodes; instances reports on the
// instances of attempts in flight. It reports whether it changed anything
// that the next loop should look at at once.
func (l *Loop) Run(ctx context.Context, capacity Capacity, nodes []*apiv1.Node, instances Instances) bool {
	present := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		present[n.Name] = true
	}
	l.present = present
	if !l.unrestored {
		l.checkRestored(ctx, instances)
	}
	for _, r := range l.requests {
		if r.provisioned() && r.pods != nil {
			r.booked = l.book(ctx, r, capacity, present)
		}
	}
	if !l.unrestored {
		deficit := l.claimAll(instances)
		for _, r := range l.requests {
			switch {
			case r.state.attempt == nil:
			case !r.live() || r.provisioned():
				l.abandon(r, "the request is no longer live")
			default:
				l.watch(ctx, r, capacity, instances, deficit)
			}
		}
		l.finishUndos(ctx)
		for _, r := range l.requests {
			if r.state.attempt != nil {
				r.attemptNodes = nodesOfAttempt(r.state.attempt, instances)
			}
		}
	}
	if l.rolledBack {
		// The snapshot still holds the nodes just deleted and the
		// instances just cancelled: a request answered on it could be
		// Provisioned on capacity that is gone. The next loop, at once,
		// answers on a fresh observation.
		klog.FromContext(ctx).V(2).Info("Capacity rolled back in this loop; requests are answered in the next loop")
		return true
	}
	var start time.Time
	productive, answered := false, 0
	for _, r := range l.requests {
		if !r.live() || r.provisioned() || r.state.attempt != nil || r.pods == nil || l.now.Before(r.state.retryAt) {
			continue
		}
		if l.unrestored && r.class == provreq.ClassBestEffortAtomicScaleUp {
			continue // an attempt of its own may be in flight, unknown until the records are read
		}
		switch r.class {
		case provreq.ClassCheckCapacity:
			if start.IsZero() {
				start = l.p.clock.Now()
			} else if l.p.clock.Since(start) > l.p.opts.CheckCapacityTimebox {
				continue // the next loop answers it
			}
			if max := l.p.opts.CheckCapacityMaxPerLoop; max > 0 && answered >= max {
				productive = true // the next loop, at once, answers the rest
				continue
			}
			answered++
			l.checkCapacity(r, capacity)
		case provreq.ClassBestEffortAtomicScaleUp:
			if l.scaleUp(ctx, r, capacity) {
				productive = true
			}
		}
	}
	l.p.publishWaiting()
	return productive
}

// book holds a provisioned request's capacity for the pods not scheduled
// yet, and revokes the request when that capacity is gone.
func (l *Loop) book(ctx context.Context, r *request, capacity Capacity, present map[string]bool) int {
	left := max(0, len(r.pods)-r.scheduled)
	sets := firstPods(r.sets, left)
	for name := range r.state.nodes {
		if !present[name] {
			l.set(r, provreq.ConditionCapacityRevoked, true, ReasonCapacityLost, fmt.Sprintf(
				"Node %s provisioned for the request is gone before %d of its %d pods were scheduled.",
				name, left, r.total()))
			return 0
		}
	}
	realOnly := r.class == provreq.ClassCheckCapacity
	var rest []*apiv1.Pod
	if placer, ok := capacity.(NodePlacer); ok && realOnly && l.p.ending != nil {
		var on []string
		rest, on = placer.PlaceOn(ctx, sets, realOnly)
		last := r.state.bookedOn
		r.state.bookedOn = on
		if l.revokeOnEnding(r, append(slices.Clone(on), last...)) {
			return 0
		}
	} else {
		rest = capacity.Place(ctx, sets, realOnly)
	}
	if len(rest) > 0 && realOnly {
		l.set(r, provreq.ConditionCapacityRevoked, true, ReasonCapacityLost, fmt.Sprintf(
			"%d of the %d pods the request still books no longer fit the cluster.", len(rest), left))
		return left - len(rest)
	}
	return left
}

// checkCapacity answers "do all the pods fit now" and books them when they
// do. When they do not, the message says why the first pod left fits no
// node, as the session words it ("no node offers 8 devices of class
// gpu.example.com"); the reason stays upstream's.
func (l *Loop) checkCapacity(r *request, capacity Capacity) {
	fit, refusal := capacity.FitAll(context.Background(), r.sets, true)
	if fit {
		r.state.backoff = 0
		r.booked = len(r.pods)
		l.set(r, provreq.ConditionProvisioned, true, provreq.ReasonCapacityIsFound,
			fmt.Sprintf("All %d pods fit the cluster's current nodes; the capacity is reserved for %v.", len(r.pods), l.p.opts.BookingTime))
		return
	}
	why := ""
	if refusal != "" {
		why = ": " + refusal
	}
	if noRetry, _ := provreq.ParseNoRetry(r.pr.Spec.Parameters); noRetry {
		l.fail(r, provreq.ReasonCapacityIsNotFound, fmt.Sprintf(
			"The %d pods do not all fit the cluster's current nodes%s, and noRetry is set.", len(r.pods), why))
		return
	}
	retry := l.backOff(r)
	l.set(r, provreq.ConditionProvisioned, false, provreq.ReasonCapacityIsNotFound, fmt.Sprintf(
		"The %d pods do not all fit the cluster's current nodes%s; next check at %s.", len(r.pods), why,
		retry.UTC().Format(time.RFC3339)))
}

// scaleUp gives all the request's pods room, or changes nothing. Capacity
// is reported provisioned only on registered nodes: pods that fit only
// thanks to nodes still to come (another scale-up's) hold them and wait.
func (l *Loop) scaleUp(ctx context.Context, r *request, capacity Capacity) bool {
	if fit, _ := capacity.FitAll(ctx, r.sets, true); fit {
		r.state.backoff = 0
		r.booked = len(r.pods)
		l.set(r, provreq.ConditionProvisioned, true, provreq.ReasonCapacityIsFound,
			fmt.Sprintf("All %d pods fit the cluster's current nodes.", len(r.pods)))
		return false
	}
	// The attempt is recorded before its increases are made, so that a
	// new leader finds it however far they went.
	res := capacity.ScaleUpAll(ctx, r.pods, func(ctx context.Context, planned []scaleup.Planned) error {
		return l.saveRecords(ctx, r, attemptFromPlan(planned, l.now))
	})
	if len(res.Left) > 0 {
		groups := map[string]*share{}
		for g, u := range res.Left {
			asked := len(u.Instances) + u.Unlisted
			before, ok := res.Before[g]
			if !ok {
				// Without the group's instances from before the increase,
				// an instance listed later cannot be told from one it had:
				// only those named are undone.
				asked = len(u.Instances)
			}
			groups[g] = newShare(asked, before, u.Instances)
		}
		l.p.undos = append(l.p.undos, &undo{why: fmt.Sprintf("ProvisioningRequest %s/%s: a later increase failed",
			r.pr.Namespace, r.pr.Name), since: l.now, groups: groups, lastChance: true, owner: r.pr.UID, request: r.state.name})
	}
	switch {
	case res.Fit && len(res.Increases) == 0:
		l.set(r, provreq.ConditionProvisioned, false, ReasonWaitingForUpcoming, fmt.Sprintf(
			"All %d pods fit once nodes already on their way register; waiting for them.", len(r.pods)))
	case res.Fit:
		r.state.attempt = newAttempt(res, l.now)
		var parts, groups []string
		for _, inc := range res.Increases {
			parts = append(parts, fmt.Sprintf("%s %d->%d", inc.NodeGroup, inc.From, inc.To))
			groups = append(groups, inc.NodeGroup)
		}
		setDetail(&r.status, DetailNodeGroups, strings.Join(groups, ","))
		l.set(r, provreq.ConditionProvisioned, false, ReasonProvisioningInProgress, fmt.Sprintf(
			"Scaling up for all %d pods: %s; waiting for the new nodes.", len(r.pods), strings.Join(parts, ", ")))
		klog.FromContext(ctx).Info("Scaled up for a ProvisioningRequest", "provisioningRequest", klog.KObj(r.pr),
			"increases", parts, "pods", len(r.pods))
		return true
	case res.Permanent:
		l.fail(r, ReasonCapacityCanNeverFit, fmt.Sprintf(
			"The %d pods can never all fit, even with every node group at its max size within the cluster limits: %s.",
			len(r.pods), res.Reason))
	default:
		retry := l.backOff(r)
		l.set(r, provreq.ConditionProvisioned, false, provreq.ReasonCapacityIsNotFound, fmt.Sprintf(
			"No room for all %d pods now: %s. Nothing was changed; next try at %s.", len(r.pods), res.Reason,
			retry.UTC().Format(time.RFC3339)))
	}
	return false
}

func nodeReady(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

// Finish writes the statuses that changed and records the events.
func (l *Loop) Finish(ctx context.Context) {
	logger := klog.FromContext(ctx)
	// The records first: a status written before them could say an
	// attempt is over (Provisioned) while the record still holds it, and a
	// new leader would then roll it back.
	if !l.unrestored {
		if err := l.saveRecords(ctx, nil, nil); err != nil {
			logger.Error(err, "Recording the all-or-nothing attempts in flight; retried in the next loop")
		}
	}
	counts := map[[2]string]int{}
	booked := 0
	for _, r := range l.requests {
		counts[[2]string{r.class, stateOf(r)}]++
		if r.provisioned() {
			booked += r.booked
		}
		if !equality.Semantic.DeepEqual(r.base, r.status) {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := l.p.status.ApplyStatus(wctx, r.pr.Namespace, r.pr.Name, r.status)
			cancel()
			if err != nil {
				logger.Error(err, "Writing ProvisioningRequest status", "provisioningRequest", klog.KObj(r.pr))
				continue
			}
			r.state.written, r.state.writtenAt = r.status.DeepCopy(), l.now
		}
		for _, e := range r.events {
			logger.V(2).Info("ProvisioningRequest transition", "provisioningRequest", klog.KObj(r.pr), "reason", e.reason,
				"message", e.message)
			if l.p.recorder != nil {
				l.p.recorder.Event(reference(r.pr), e.kind, e.reason, e.message)
			}
		}
	}
	l.p.metrics.Requests(counts)
	// Set in every loop, from the requests still provisioned at its end:
	// those provisioned in this loop count, those whose booking ended or
	// was revoked do not.
	l.p.metrics.BookedPods(booked)
	l.publishHolds()
	l.publishRunLimits()
	for i, pod := range l.released {
		if i == maxReleasedEvents {
			break
		}
		name, _ := provreq.ConsumedRequestName(pod)
		if l.p.recorder != nil {
			l.p.recorder.Eventf(pod, apiv1.EventTypeNormal, "ProvisioningRequestNotLive",
				"Pod consumes ProvisioningRequest %s/%s, which is missing, failed or over: it is treated as an ordinary pending pod",
				pod.Namespace, name)
		}
	}
	l.consumingPodEvents()
}

const maxReleasedEvents = 50

// consumingPodEvents tells up to maxConsumerEvents set-aside pods why they
// did not trigger a scale-up, with upstream's event: type Normal, no reason,
// upstream's message. As upstream, every loop that sets a pod aside tells it
// again (the event recorder folds the repeats into one event's count).
func (l *Loop) consumingPodEvents() {
	if l.p.recorder == nil {
		return
	}
	for i, pod := range l.consumer {
		if i == maxConsumerEvents {
			return
		}
		name, _ := provreq.ConsumedRequestName(pod)
		l.p.recorder.Eventf(pod, apiv1.EventTypeNormal, "",
			"Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest %s/%s", pod.Namespace, name)
	}
}

// maxConsumerEvents is upstream's cap on consuming-pod events per loop.
const maxConsumerEvents = 50

func stateOf(r *request) string {
	c := r.status.Conditions
	switch {
	case provreq.IsConditionTrue(c, provreq.ConditionFailed):
		return "failed"
	case provreq.IsConditionTrue(c, provreq.ConditionCapacityRevoked):
		return "revoked"
	case provreq.IsConditionTrue(c, provreq.ConditionBookingExpired):
		return "bookingExpired"
	case provreq.IsConditionTrue(c, provreq.ConditionProvisioned):
		return "provisioned"
	case provreq.IsConditionTrue(c, provreq.ConditionAccepted):
		return "accepted"
	}
	return "pending"
}

// ownStatus is the part of the request's status the autoscaler owns: its
// conditions and class details, copied.
func ownStatus(pr *v1.ProvisioningRequest) *v1.ProvisioningRequestStatus {
	st := &v1.ProvisioningRequestStatus{Conditions: provreq.ConditionsOfTypes(pr.Status.Conditions, provreq.ConditionTypes()...)}
	if len(pr.Status.ProvisioningClassDetails) > 0 {
		st.ProvisioningClassDetails = map[string]v1.Detail{}
		for k, v := range pr.Status.ProvisioningClassDetails {
			st.ProvisioningClassDetails[k] = v
		}
	}
	return st
}

func setDetail(st *v1.ProvisioningRequestStatus, key, value string) {
	if st.ProvisioningClassDetails == nil {
		st.ProvisioningClassDetails = map[string]v1.Detail{}
	}
	st.ProvisioningClassDetails[key] = v1.Detail(value)
}

func condition(typ, status, reason, message string, generation int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: message,
		ObservedGeneration: generation}
}

// reference is the request as an event target (its kind is not in the
// client-go scheme, so the recorder cannot work it out).
func reference(pr *v1.ProvisioningRequest) *apiv1.ObjectReference {
	return &apiv1.ObjectReference{Kind: v1.Kind, APIVersion: v1.SchemeGroupVersion.String(), Namespace: pr.Namespace,
		Name: pr.Name, UID: pr.UID, ResourceVersion: pr.ResourceVersion}
}

var _ Capacity = (*scaleup.Session)(nil)
