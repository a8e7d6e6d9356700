package processors

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// ReplicaPlans remembers, per ReplicaSet (and likewise per StatefulSet and
// Job: see upcomingReplicas), how many of its replicas earlier scale-ups
// made room for, so that a ReplicaSet larger than --pod-injection-limit is
// counted in consecutive pieces rather than in a window that slides as its
// pods are bound, and the pods a StatefulSet or a Job creates one at a time
// or in batches find the room made for them.
//
// Without it, a loop counts a large ReplicaSet's unschedulable pods and
// stand-ins up to the limit; once the first decision's pods are bound, the
// next loop counts as many further replicas as were bound in between, and
// the burst gets a small scale-up at every pause of the ReplicaSet
// controller. With it, the replicas an earlier decision made room for but
// that are not bound (not created yet, or pending and not among the loop's
// unschedulable pods) are placed on that room by class
// (scaleup.Session.Place: no scale-up, no simulation per pod), and the
// stand-ins the limit allows start after them, so each decision covers the
// next piece of the ReplicaSet, also in a loop where none of its pods is
// unschedulable (they fit the room made for them). A further piece is
// counted only once half of the replicas planned exist as pods, and none
// while the ReplicaSet's pods are refused (ReplicaFailure), when the room
// held shrinks to its pods that exist (UnschedulablePods.standIns): the room
// made ahead of a ReplicaSet's pods is at most as many replicas as exist
// plus one piece.
//
// ReplicaPlans is a CapacityProcessor (the placing) and a
// ScaleUpStatusProcessor (recording what a scale-up made room for); the
// UnschedulablePods processor that shares it counts the bookings and the
// stand-ins (UnschedulablePods.Plans). It is used by the loop's goroutine
// only.
type ReplicaPlans struct {
	// TTL bounds how long a plan holds room for replicas that do not come
	// and are not reported refused (the ReplicaSet controller stopped):
	// --max-node-provision-time by default.
	TTL   time.Duration
	plans map[types.UID]*replicaPlan
	// What the current loop booked and counted, settled by ScaleUpDone.
	bookings []booking
	counted  map[types.UID]countedPiece
}

// replicaPlan says that scale-ups made room for the first upTo replicas of
// a ReplicaSet (bound, pending or still to create).
type replicaPlan struct {
	kind, namespace, name string
	upTo                  int
	sample                *apiv1.Pod
	updated               time.Time
}

// booking is room a plan holds in this loop: count copies of sample.
type booking struct {
	uid    types.UID
	rsName string
	sample *apiv1.Pod
	count  int
}

// countedPiece is the stand-ins counted for a ReplicaSet in this loop:
// replicas from..from+count.
type countedPiece struct {
	kind, namespace, name string
	sample                *apiv1.Pod
	from, count           int
}

// NewReplicaPlans returns an empty set of plans.
func NewReplicaPlans(ttl time.Duration) *ReplicaPlans {
	return &ReplicaPlans{TTL: ttl, plans: map[types.UID]*replicaPlan{}}
}

// beginLoop drops what the last loop left and the plans past their TTL, and
// returns the live plans.
func (r *ReplicaPlans) beginLoop(now time.Time) map[types.UID]*replicaPlan {
	r.bookings, r.counted = nil, map[types.UID]countedPiece{}
	for uid, pl := range r.plans {
		if r.TTL > 0 && now.Sub(pl.updated) > r.TTL {
			delete(r.plans, uid)
		}
	}
	return r.plans
}

// planned returns how many replicas of the ReplicaSet uid earlier
// scale-ups made room for (0: none).
func (r *ReplicaPlans) planned(uid types.UID) int {
	if pl := r.plans[uid]; pl != nil {
		return pl.upTo
	}
	return 0
}

func (r *ReplicaPlans) forget(uid types.UID) { delete(r.plans, uid) }

func (r *ReplicaPlans) book(uid types.UID, rsName string, sample *apiv1.Pod, count int) {
	r.bookings = append(r.bookings, booking{uid: uid, rsName: rsName, sample: sample, count: count})
}

func (r *ReplicaPlans) count(uid types.UID, piece countedPiece) { r.counted[uid] = piece }

// HasWork implements CapacityProcessor: bookings matter only to the pods
// of an ordinary scale-up, so they never ask for a session by themselves.
func (r *ReplicaPlans) HasWork() bool { return false }

// ProcessCapacity implements CapacityProcessor: each booking's replicas are
// placed on existing or upcoming room, so that the ordinary scale-up does
// not see that room as free. Replicas that do not fit (the room is gone)
// are left out; nothing is scaled for them here.
func (r *ReplicaPlans) ProcessCapacity(ctx context.Context, _ *Loop, session *scaleup.Session) bool {
	logger := klog.FromContext(ctx)
	for _, b := range r.bookings {
		set := make([]*apiv1.Pod, b.count)
		for i := range set {
			c := *b.sample
			c.Name = fmt.Sprintf("%s-planned-%d", b.rsName, i)
			c.UID = types.UID(fmt.Sprintf("%s%s/planned/%d", upcomingReplicaUIDPrefix, b.uid, i))
			c.Spec.NodeName = ""
			set[i] = &c
		}
		left := session.Place(ctx, [][]*apiv1.Pod{set}, false)
		logger.V(2).Info("Holding the room earlier scale-ups made for replicas not bound yet",
			"workload", klog.KRef(b.sample.Namespace, b.rsName), "replicas", b.count, "withoutRoom", len(left))
	}
	return false
}

// ScaleUpDone implements ScaleUpStatusProcessor: a scale-up that ran
// without errors and left none of a ReplicaSet's pods without room extends
// its plan by the stand-ins it counted. Otherwise the plan stays as it was:
// the next loop counts again from there.
func (r *ReplicaPlans) ScaleUpDone(ctx context.Context, loop *Loop, status ScaleUpStatus) {
	defer func() { r.bookings, r.counted = nil, nil }()
	res := status.Result
	if len(r.counted) == 0 || res.Remaining == nil || len(res.Errors) > 0 {
		return
	}
	passed := map[types.UID]int{}
	for _, p := range status.Pods {
		if uid, ok := standInOwner(p); ok {
			passed[uid]++
		}
	}
	unhelped := map[types.UID]bool{}
	for p := range res.Remaining {
		if uid, ok := standInOwner(p); ok {
			unhelped[uid] = true
		} else if ref := controllerRef(p); ref != "" {
			unhelped[ref] = true
		}
	}
	for uid, piece := range r.counted {
		if unhelped[uid] || passed[uid] != piece.count {
			continue
		}
		r.plans[uid] = &replicaPlan{kind: piece.kind, namespace: piece.namespace, name: piece.name, upTo: piece.from + piece.count,
			sample: piece.sample, updated: loop.Now}
		klog.FromContext(ctx).V(2).Info("Room made for the "+piece.kind+"'s replicas", "workload",
			klog.KRef(piece.namespace, piece.name), "upTo", piece.from+piece.count)
	}
}

// standInOwner returns the workload of a stand-in counted by
// upcomingReplicas.
func standInOwner(p *apiv1.Pod) (types.UID, bool) {
	if !IsUpcomingReplica(p) {
		return "", false
	}
	return controllerRef(p), true
}

func controllerRef(p *apiv1.Pod) types.UID {
	for _, ref := range p.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && plansAhead(ref.Kind) {
			return ref.UID
		}
	}
	return ""
}
