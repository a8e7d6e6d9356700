package processors

import (
	"context"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/estimator"
)

// UnschedulablePods is the first pod-list processor of the default set: of
// the pending pods, it keeps those the scheduler marked unschedulable, with
// their pending twins it has not tried yet (twins) and stand-ins for the
// replicas their ReplicaSets have still to create (upcomingReplicas).
type UnschedulablePods struct {
	// ReplicaSets, when set, let the stand-ins be counted; without it only
	// the pods that exist are.
	ReplicaSets appslisters.ReplicaSetLister
}

// ProcessPods implements PodListProcessor.
func (u UnschedulablePods) ProcessPods(ctx context.Context, loop *Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	candidates := twins(ctx, pods)
	return append(candidates, u.upcomingReplicas(ctx, candidates, loop)...)
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

// MaxUpcomingReplicas bounds the replicas counted ahead of their creation
// in one loop, so that a ReplicaSet of absurd size costs bounded memory; the
// rest are counted once they exist.
const MaxUpcomingReplicas = 20000

// upcomingReplicaUIDPrefix marks the stand-ins of replicas not created yet.
const upcomingReplicaUIDPrefix = "upcoming-replica/"

// IsUpcomingReplica reports whether p stands for a replica its ReplicaSet
// has not created yet (no such pod exists: nothing is recorded on it).
func IsUpcomingReplica(p *apiv1.Pod) bool {
	return len(p.UID) > len(upcomingReplicaUIDPrefix) && string(p.UID[:len(upcomingReplicaUIDPrefix)]) == upcomingReplicaUIDPrefix
}

// upcomingReplicas returns, for each ReplicaSet with a pod among
// unschedulable, stand-ins for the replicas it has still to create
// (spec.replicas minus its pods that are not terminating or terminal):
// copies of that pod under new names. They are what the ReplicaSet
// controller is about to create from the same template, so the scale-up
// makes room for them now rather than in a staircase of later loops; if they
// never come, the nodes are unneeded and scaled down as any other.
func (u UnschedulablePods) upcomingReplicas(ctx context.Context, unschedulable []*apiv1.Pod, obs *Loop) []*apiv1.Pod {
	if u.ReplicaSets == nil || len(unschedulable) == 0 {
		return nil
	}
	sample := map[types.UID]*apiv1.Pod{}
	for _, p := range unschedulable {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "ReplicaSet" && sample[ref.UID] == nil {
			sample[ref.UID] = p
		}
	}
	if len(sample) == 0 {
		return nil
	}
	active := map[types.UID]int{}
	for _, pods := range [][]*apiv1.Pod{obs.PendingPods, obs.ScheduledPods} {
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			if ref := metav1.GetControllerOf(p); ref != nil && sample[ref.UID] != nil {
				active[ref.UID]++
			}
		}
	}
	logger := klog.FromContext(ctx)
	var out []*apiv1.Pod
	for uid, p := range sample {
		ref := metav1.GetControllerOf(p)
		rs, err := u.ReplicaSets.ReplicaSets(p.Namespace).Get(ref.Name)
		if err != nil || rs.UID != uid || rs.DeletionTimestamp != nil {
			continue
		}
		want := int32(1)
		if rs.Spec.Replicas != nil {
			want = *rs.Spec.Replicas
		}
		missing := int(want) - active[uid]
		if room := MaxUpcomingReplicas - len(out); missing > room {
			logger.Info("Counting fewer upcoming replicas than the ReplicaSet will create; the rest count once created",
				"replicaSet", klog.KObj(rs), "missing", missing, "counted", room)
			missing = room
		}
		for i := 0; i < missing; i++ {
			c := *p
			c.Name = fmt.Sprintf("%s-upcoming-%d", rs.Name, i)
			c.UID = types.UID(fmt.Sprintf("%s%s/%d", upcomingReplicaUIDPrefix, uid, i))
			c.Spec.NodeName = ""
			out = append(out, &c)
		}
		if missing > 0 {
			logger.V(2).Info("Counting replicas the ReplicaSet has still to create", "replicaSet", klog.KObj(rs),
				"replicas", want, "active", active[uid], "upcoming", missing)
		}
	}
	return out
}
