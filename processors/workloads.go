package processors

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The workloads whose pods still to create the loops count ahead as
// stand-ins (upcomingReplicas): the controllers that create their pods over
// time from one template.
const (
	kindReplicaSet  = "ReplicaSet"
	kindStatefulSet = "StatefulSet"
	kindJob         = "Job"
)

// plansAhead reports whether the loops count the pods still to create of
// a controller of this kind.
func plansAhead(kind string) bool {
	return kind == kindReplicaSet || kind == kindStatefulSet || kind == kindJob
}

// workloadTarget is what a loop reads of a workload with a pod among the
// unschedulable ones: how many active pods its controller is to have
// (want), and, when its pods still to create are not counted ahead, why
// (refused).
type workloadTarget struct {
	want    int
	refused string
}

// target reads the workload kind/namespace/name of UID uid from the
// listers; ok is false when it is not known (no lister for its kind, gone,
// replaced by another of the same name, being deleted).
func (u UnschedulablePods) target(kind, namespace, name string, uid types.UID, now time.Time) (workloadTarget, bool) {
	var obj metav1.Object
	var t workloadTarget
	switch kind {
	case kindReplicaSet:
		if u.ReplicaSets == nil {
			return t, false
		}
		rs, err := u.ReplicaSets.ReplicaSets(namespace).Get(name)
		if err != nil {
			return t, false
		}
		obj, t.want = rs, replicasOf(rs)
		if ReplicasRefused(rs) {
			t.refused = "the ReplicaSet's pods are refused (ReplicaFailure)"
		}
	case kindStatefulSet:
		if u.StatefulSets == nil {
			return t, false
		}
		set, err := u.StatefulSets.StatefulSets(namespace).Get(name)
		if err != nil {
			return t, false
		}
		obj, t.want, t.refused = set, statefulSetReplicas(set), statefulSetRefusal(set)
	case kindJob:
		if u.Jobs == nil {
			return t, false
		}
		job, err := u.Jobs.Jobs(namespace).Get(name)
		if err != nil {
			return t, false
		}
		obj, t.want, t.refused = job, JobPodsWanted(job), jobRefusal(job, now)
	default:
		return t, false
	}
	if obj.GetUID() != uid || obj.GetDeletionTimestamp() != nil {
		return t, false
	}
	return t, true
}

func statefulSetReplicas(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// statefulSetRefusal says why a StatefulSet's pods still to create are not
// counted ahead: each replica of one with volumeClaimTemplates mounts its
// own claims (<claim>-<set>-<ordinal>), which the simulation's volume
// plugins (VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits)
// look up as PersistentVolumeClaim objects. A stand-in carrying the claims
// of the replica it stands for names objects that do not exist yet (the
// plugins refuse it); one carrying the claims of the pod it copies is bound
// to that pod's volumes and their zone; one without claims would get room
// the real replica, whose claims may be pinned to a zone, could not use. So
// such a set's replicas count once they exist. The StatefulSet controller
// reports no failed creations in the status (only events): its refused
// replicas are bounded as any workload's, by the room held for planned
// replicas that have not arrived (ReplicaPlans).
func statefulSetRefusal(set *appsv1.StatefulSet) string {
	if len(set.Spec.VolumeClaimTemplates) > 0 {
		return "each replica mounts its own volume claims (volumeClaimTemplates)"
	}
	return ""
}

// JobPodsWanted returns how many pods the Job controller keeps active for
// job: parallelism (1 when unset), at most the completions still to
// succeed; for a Job without completions (a work queue), none once a pod
// succeeded.
func JobPodsWanted(job *batchv1.Job) int {
	parallelism := 1
	if job.Spec.Parallelism != nil {
		parallelism = int(*job.Spec.Parallelism)
	}
	if job.Spec.Completions == nil {
		if job.Status.Succeeded > 0 {
			return 0
		}
		return parallelism
	}
	return max(0, min(parallelism, int(*job.Spec.Completions)-int(job.Status.Succeeded)))
}

// jobRefusal says why a Job's pods still to create are not counted ahead
// at now: it is suspended, finished or finishing (Complete, Failed,
// FailureTarget, SuccessCriteriaMet), past its activeDeadlineSeconds, or
// some of its pods failed (the controller recreates them after a back-off
// that grows with each failure, and gives up at backoffLimit). The Job
// controller reports refused creations (a quota, a webhook) only in events;
// those are bounded by the room held for planned pods that have not
// arrived (ReplicaPlans).
func jobRefusal(job *batchv1.Job, now time.Time) string {
	if job.Spec.Suspend != nil && *job.Spec.Suspend {
		return "the Job is suspended"
	}
	for _, c := range job.Status.Conditions {
		if c.Status != apiv1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobFailed, batchv1.JobFailureTarget, batchv1.JobSuccessCriteriaMet:
			return fmt.Sprintf("the Job is finishing (%s)", c.Type)
		}
	}
	if d := job.Spec.ActiveDeadlineSeconds; d != nil && job.Status.StartTime != nil &&
		!now.Before(job.Status.StartTime.Add(time.Duration(*d)*time.Second)) {
		return "the Job is past its activeDeadlineSeconds"
	}
	if job.Status.Failed > 0 {
		return "pods of the Job failed (recreated after a back-off)"
	}
	return ""
}

// activePod reports whether p counts among its controller's pods: not
// being deleted and not terminal, as the ReplicaSet, StatefulSet and Job
// controllers count them.
func activePod(p *apiv1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != apiv1.PodSucceeded && p.Status.Phase != apiv1.PodFailed
}
