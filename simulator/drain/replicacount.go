package drain

import apiv1 "k8s.io/api/core/v1"

// replicaCountRule runs before the interrupting rules, and only with
// --skip-nodes-with-custom-controller-pods (upstream's order): a pod whose
// ReplicationController, ReplicaSet, StatefulSet or Job the listers do not
// have blocks (ControllerNotFound), even when safe-to-evict is "true" or the
// pod is terminal; a pod whose ReplicationController or ReplicaSet wants fewer
// than minReplicas replicas blocks (MinReplicasReached).
type replicaCountRule struct {
	listers     Listers
	minReplicas int
}

func (r replicaCountRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	ref := controllerRefOf(pod)
	if ref == nil || !isReplicatingKind(ref.Kind) {
		return outcome{}
	}
	found, err := r.listers.lookUpController(pod.Namespace, ref)
	switch {
	case err != nil:
		return blocked(UnexpectedError, "looking up the controller of pod %s/%s: %v", pod.Namespace, pod.Name, err)
	case !found.found:
		return blocked(ControllerNotFound, "%s %s/%s of pod %s is not found", ref.Kind, pod.Namespace, ref.Name, pod.Name)
	case found.replicas != nil && int(*found.replicas) < r.minReplicas:
		return blocked(MinReplicasReached, "%s %s/%s of pod %s wants %d replicas, fewer than --min-replica-count=%d",
			ref.Kind, pod.Namespace, ref.Name, pod.Name, *found.replicas, r.minReplicas)
	}
	return outcome{}
}
