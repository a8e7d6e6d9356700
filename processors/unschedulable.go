package processors

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/estimator"
)

// UnschedulablePods is the first pod-list processor of the default set: of
// the pending pods, it keeps those the scheduler marked unschedulable, with
// their pending twins it has not tried yet (twins), the pods of bypassed
// schedulers those have not processed yet, and stand-ins for the replicas
// their ReplicaSets have still to create (upcomingReplicas).
type UnschedulablePods struct {
	// ReplicaSets, StatefulSets and Jobs, when set, let the stand-ins of
	// that kind's pods still to create be counted; without them only the
	// pods that exist are.
	ReplicaSets  appslisters.ReplicaSetLister
	StatefulSets appslisters.StatefulSetLister
	Jobs         batchlisters.JobLister
	// InjectionLimit caps the pods this processor returns when it adds
	// stand-ins (--pod-injection-limit): stand-ins fill the room up to it,
	// and when the pods that exist already reach it none are added (the
	// pods themselves are never dropped). Zero or less adds none.
	InjectionLimit int
	// AllowedSchedulers, when not empty, keeps only the pods of these
	// schedulers (--allowed-scheduler-names); BypassedSchedulers' pods count
	// as unschedulable before their scheduler has processed them
	// (--bypassed-scheduler-names).
	AllowedSchedulers  []string
	BypassedSchedulers []string
	// Plans, when set, counts a ReplicaSet larger than InjectionLimit in
	// consecutive pieces (see ReplicaPlans); it must also be in the loop's
	// capacity and scale-up status processors.
	Plans *ReplicaPlans
}

// ProcessPods implements PodListProcessor.
func (u UnschedulablePods) ProcessPods(ctx context.Context, loop *Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	pods = OfAllowedSchedulers(pods, u.AllowedSchedulers)
	candidates := twins(ctx, pods)
	candidates = append(candidates, unprocessedByBypassed(pods, candidates, u.BypassedSchedulers)...)
	return append(candidates, u.upcomingReplicas(ctx, candidates, loop)...)
}

// OfAllowedSchedulers returns the pods whose spec.schedulerName is in
// allowed (all of them when allowed is empty). A pod without a scheduler
// name is the default scheduler's, as the API server defaults it.
func OfAllowedSchedulers(pods []*apiv1.Pod, allowed []string) []*apiv1.Pod {
	if len(allowed) == 0 {
		return pods
	}
	out := make([]*apiv1.Pod, 0, len(pods))
	for _, p := range pods {
		if slices.Contains(allowed, schedulerName(p)) {
			out = append(out, p)
		}
	}
	return out
}

func schedulerName(p *apiv1.Pod) string {
	if p.Spec.SchedulerName == "" {
		return apiv1.DefaultSchedulerName
	}
	return p.Spec.SchedulerName
}

// IsUnprocessedByBypassed reports whether pod belongs to one of the bypassed
// schedulers and that scheduler has not processed it yet: pending, not
// being deleted, with no PodScheduled condition or a false one without a
// reason.
func IsUnprocessedByBypassed(pod *apiv1.Pod, bypassed []string) bool {
	if len(bypassed) == 0 || !slices.Contains(bypassed, schedulerName(pod)) {
		return false
	}
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Status.Phase == apiv1.PodSucceeded ||
		pod.Status.Phase == apiv1.PodFailed || IsUnschedulable(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return c.Status == apiv1.ConditionFalse && c.Reason == ""
		}
	}
	return true
}

// unprocessedByBypassed returns the pods of bypassed schedulers those have
// not processed yet, except the ones already in taken.
func unprocessedByBypassed(pods, taken []*apiv1.Pod, bypassed []string) []*apiv1.Pod {
	if len(bypassed) == 0 {
		return nil
	}
	in := make(map[*apiv1.Pod]bool, len(taken))
	for _, p := range taken {
		in[p] = true
	}
	var out []*apiv1.Pod
	for _, p := range pods {
		if !in[p] && IsUnprocessedByBypassed(p, bypassed) {
			out = append(out, p)
		}
	}
	return out
}

// IsUnschedulable reports whether the scheduler has marked pod unschedulable.
func IsUnschedulable(pod *apiv1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.Status.Phase == apiv1.PodSucceeded || pod.Status.Phase == apiv1.PodFailed {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == apiv1.PodScheduled && c.Status == apiv1.ConditionFalse && c.Reason == apiv1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// A burst of pods (a Deployment created or scaled by hundreds of replicas)
// reaches the autoscaler in pieces: the ReplicaSet controller creates the
// pods over seconds (minutes for tens of thousands), and the scheduler marks
// them unschedulable over more seconds. So that one decision covers the
// whole burst, a loop counts with each unschedulable pod its pending twins
// the scheduler has not tried yet (twins) and the replicas its ReplicaSet has
// still to create (upcomingReplicas).

// twins returns the pending pods the scheduler marked unschedulable, and
// with them the pending pods it has not tried yet (no PodScheduled
// condition, not being deleted) of the same workload and scheduling spec
// (estimator.GroupPods) as a marked one. A burst of 500 replicas is released
// by the ReplicaSet controller in a second or two, but the scheduler takes
// several more to mark them all; the twins would be marked alike (the
// decision first places pods on existing and upcoming room, so twins that
// fit are only set aside), so one decision covers the whole burst.
func twins(ctx context.Context, pending []*apiv1.Pod) []*apiv1.Pod {
	var marked, untried []*apiv1.Pod
	for _, p := range pending {
		switch {
		case IsUnschedulable(p):
			marked = append(marked, p)
		case p.DeletionTimestamp == nil && untriedByScheduler(p):
			untried = append(untried, p)
		}
	}
	if len(marked) == 0 || len(untried) == 0 {
		return marked
	}
	isMarked := make(map[*apiv1.Pod]bool, len(marked))
	for _, p := range marked {
		isMarked[p] = true
	}
	out := marked
	added := 0
	for _, g := range estimator.GroupPods(append(append([]*apiv1.Pod(nil), marked...), untried...)) {
		if !isMarked[g.Pods[0]] {
			continue // GroupPods keeps input order: a group with a marked pod starts with one
		}
		for _, p := range g.Pods {
			if !isMarked[p] {
				out = append(out, p)
				added++
			}
		}
	}
	if added > 0 {
		klog.FromContext(ctx).V(2).Info("Counting pending pods the scheduler has not tried yet with their unschedulable twins",
			"twins", added, "unschedulable", len(marked))
	}
	return out
}

func untriedByScheduler(p *apiv1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return false
		}
	}
	return true
}

// upcomingReplicaUIDPrefix marks the stand-ins of replicas not created yet.
const upcomingReplicaUIDPrefix = "upcoming-replica/"

// IsUpcomingReplica reports whether p stands for a replica its ReplicaSet
// has not created yet (no such pod exists: nothing is recorded on it).
func IsUpcomingReplica(p *apiv1.Pod) bool {
	return len(p.UID) > len(upcomingReplicaUIDPrefix) && string(p.UID[:len(upcomingReplicaUIDPrefix)]) == upcomingReplicaUIDPrefix
}

// CountsWholeReplicaSet reports whether p belongs to a ReplicaSet whose
// replicas still to create the loops count as stand-ins (upcomingReplicas),
// so that its later pods are known before they exist: one that lister
// knows, not being deleted, whose replicas are not refused (ReplicaFailure),
// with stand-ins at all (limit, the --pod-injection-limit, above 0), and of
// at most limit replicas unless inPieces (UnschedulablePods.Plans: a larger
// one is counted in consecutive pieces, a loop after the other). Other
// unschedulable pods may still take some of the room; those replicas count
// once created.
func CountsWholeReplicaSet(lister appslisters.ReplicaSetLister, p *apiv1.Pod, limit int, inPieces bool) bool {
	ref := metav1.GetControllerOf(p)
	if lister == nil || ref == nil || ref.Kind != "ReplicaSet" || limit <= 0 {
		return false
	}
	rs, err := lister.ReplicaSets(p.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID || rs.DeletionTimestamp != nil || ReplicasRefused(rs) {
		return false
	}
	return inPieces || replicasOf(rs) <= limit
}

// ReplicasRefused reports whether the ReplicaSet controller's last attempt
// to create or delete the ReplicaSet's pods failed (condition
// ReplicaFailure=True: a ResourceQuota, an admission webhook, a missing
// PriorityClass refused them). Until it clears, the replicas it has not
// created are not counted ahead: they may never come.
func ReplicasRefused(rs *appsv1.ReplicaSet) bool {
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == apiv1.ConditionTrue {
			return true
		}
	}
	return false
}

func replicasOf(rs *appsv1.ReplicaSet) int {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return int(*rs.Spec.Replicas)
}

// workloadPods is what a loop sees of one workload's pods (a ReplicaSet, a
// StatefulSet, a Job): those not terminating or terminal (active), of which
// bound to a node, and of which among the loop's unschedulable pods.
type workloadPods struct {
	kind, namespace, name        string
	sample                       *apiv1.Pod // a pod to copy
	active, bound, unschedulable int
}

// upcomingReplicas returns, for each workload (ReplicaSet, StatefulSet,
// Job) with a pod among unschedulable, stand-ins for the pods it has still
// to create (its controller's target, workloadTarget.want, minus its pods
// that are not terminating or terminal): copies of that pod under new
// names. They are what the controller is about to create from the same
// template (a StatefulSet with podManagementPolicy OrderedReady one at a
// time, each once the previous is Ready; a Job in growing batches), so the
// scale-up makes room for them now rather than in a staircase of later
// loops; if they never come, the nodes are unneeded and scaled down as any
// other. With Plans, the pods an earlier scale-up made room for and that
// are not bound or among unschedulable are booked on that room instead, and
// the stand-ins start after them (see ReplicaPlans). How far ahead it
// counts is bounded by standIns.
func (u UnschedulablePods) upcomingReplicas(ctx context.Context, unschedulable []*apiv1.Pod, obs *Loop) []*apiv1.Pod {
	// The stand-ins fill the room up to the injection limit, so that a
	// workload of absurd size costs bounded memory; the rest are counted
	// once they exist.
	limit := u.InjectionLimit - len(unschedulable)
	var plans map[types.UID]*replicaPlan
	if u.Plans != nil {
		plans = u.Plans.beginLoop(obs.Now)
	}
	if (u.ReplicaSets == nil && u.StatefulSets == nil && u.Jobs == nil) ||
		(len(plans) == 0 && (len(unschedulable) == 0 || limit <= 0)) {
		return nil
	}
	sets := map[types.UID]*workloadPods{}
	for _, p := range unschedulable {
		ref := metav1.GetControllerOf(p)
		if ref == nil || !plansAhead(ref.Kind) {
			continue
		}
		if sets[ref.UID] == nil {
			sets[ref.UID] = &workloadPods{kind: ref.Kind, namespace: p.Namespace, name: ref.Name, sample: p}
		}
		sets[ref.UID].unschedulable++
	}
	for uid, pl := range plans {
		if sets[uid] == nil {
			sets[uid] = &workloadPods{kind: pl.kind, namespace: pl.namespace, name: pl.name, sample: pl.sample}
		}
	}
	if len(sets) == 0 {
		return nil
	}
	for _, pods := range [][]*apiv1.Pod{obs.PendingPods, obs.ScheduledPods} {
		for _, p := range pods {
			if !activePod(p) {
				continue
			}
			if ref := metav1.GetControllerOf(p); ref != nil && sets[ref.UID] != nil {
				sets[ref.UID].active++
				if p.Spec.NodeName != "" {
					sets[ref.UID].bound++
				}
			}
		}
	}
	var out []*apiv1.Pod
	for uid, set := range sets {
		t, ok := u.target(set.kind, set.namespace, set.name, uid, obs.Now)
		if !ok {
			if u.Plans != nil {
				u.Plans.forget(uid)
			}
			continue
		}
		out = append(out, u.standIns(ctx, uid, t, set, limit-len(out))...)
	}
	return out
}

// standIns books, with Plans, the room earlier pieces made for the
// workload's pods not bound yet, and returns at most room stand-ins for its
// pods after the ones that exist or were planned: when one of its pods is
// unschedulable, or, with a plan, when the plan's pods arrive (its pods may
// all fit the room made for them). A workload whose pods still to create
// are refused (workloadTarget.refused: a ReplicaSet's ReplicaFailure, a
// suspended or finishing Job, ...) gets no stand-ins, and room is held only
// for its pods that exist; one whose earlier pieces have mostly not arrived
// (fewer pods exist than half the pods planned) gets no further piece until
// they do. So the room made ahead of a workload's pods is at most as many
// pods as exist plus one piece.
func (u UnschedulablePods) standIns(ctx context.Context, uid types.UID, t workloadTarget, set *workloadPods, room int) []*apiv1.Pod {
	logger := klog.FromContext(ctx)
	owner := klog.KRef(set.namespace, set.name)
	want, refused := t.want, t.refused != ""
	from, planned := set.active, 0
	if u.Plans != nil {
		planned = min(u.Plans.planned(uid), want)
		if refused {
			planned = min(planned, set.active)
		}
		if held := planned - set.bound - set.unschedulable; held > 0 {
			u.Plans.book(uid, set.name, set.sample, held)
		}
		if planned <= set.bound {
			u.Plans.forget(uid) // every pod it made room for is bound
		}
		from = max(from, planned)
	}
	missing := want - from
	switch {
	case missing <= 0 || (set.unschedulable == 0 && planned == 0):
		return nil // nothing to create, or no pod of it asks for room and no plan goes on
	case refused:
		logger.V(2).Info("Counting no upcoming replicas: "+t.refused,
			"kind", set.kind, "workload", owner, "replicas", want, "active", set.active)
		return nil
	case 2*set.active < planned:
		logger.V(2).Info("Counting no further upcoming replicas until half of those counted before exist",
			"kind", set.kind, "workload", owner, "replicas", want, "active", set.active, "planned", planned)
		return nil
	}
	if missing > room {
		if room > 0 {
			logger.Info("Counting fewer upcoming replicas than the "+set.kind+" will create (--pod-injection-limit); the rest count once created",
				"workload", owner, "missing", missing, "counted", room, "podInjectionLimit", u.InjectionLimit)
		}
		missing = room
	}
	if missing <= 0 {
		return nil
	}
	out := make([]*apiv1.Pod, missing)
	for i := range out {
		c := *set.sample
		c.Name = fmt.Sprintf("%s-upcoming-%d", set.name, from+i)
		c.UID = types.UID(fmt.Sprintf("%s%s/%d", upcomingReplicaUIDPrefix, uid, from+i))
		c.Spec.NodeName = ""
		out[i] = &c
	}
	if u.Plans != nil {
		u.Plans.count(uid, countedPiece{kind: set.kind, namespace: set.namespace, name: set.name, sample: set.sample,
			from: from, count: missing})
	}
	logger.V(2).Info("Counting replicas the "+set.kind+" has still to create", "workload", owner,
		"replicas", want, "active", set.active, "from", from, "upcoming", missing)
	return out
}
