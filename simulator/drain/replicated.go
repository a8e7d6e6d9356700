package drain

import apiv1 "k8s.io/api/core/v1"

// replicatedRule blocks the pods nothing would recreate elsewhere:
//
//   - a pod without a controller: NotReplicated;
//   - with customIsNotReplicated (--skip-nodes-with-custom-controller-pods), a
//     pod whose controller is of a kind other than ReplicationController,
//     ReplicaSet, StatefulSet or Job: NotReplicated, since we cannot tell
//     whether that controller recreates it;
//   - with lookUp (the flag off, so replicaCountRule did not run), a pod whose
//     ReplicationController, ReplicaSet, StatefulSet or Job the listers do not
//     have: ControllerNotFound. Custom controllers are then trusted, as
//     upstream does, and --min-replica-count is not applied.
//
// DaemonSet, safe-to-evict "true" and terminal pods never get here.
type replicatedRule struct {
	listers               Listers
	lookUp                bool
	customIsNotReplicated bool
}

func (r replicatedRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	ref := controllerRefOf(pod)
	if ref == nil {
		return blocked(NotReplicated, "pod %s/%s has no controller", pod.Namespace, pod.Name)
	}
	if !isReplicatingKind(ref.Kind) {
		if r.customIsNotReplicated {
			return blocked(NotReplicated, "pod %s/%s is owned by %s %s (apiVersion %s), a custom controller",
				pod.Namespace, pod.Name, ref.Kind, ref.Name, ref.APIVersion)
		}
		return outcome{}
	}
	if !r.lookUp {
		return outcome{}
	}
	found, err := r.listers.lookUpController(pod.Namespace, ref)
	switch {
	case err != nil:
		return blocked(UnexpectedError, "looking up the controller of pod %s/%s: %v", pod.Namespace, pod.Name, err)
	case !found.found:
		return blocked(ControllerNotFound, "%s %s/%s of pod %s is not found", ref.Kind, pod.Namespace, ref.Name, pod.Name)
	}
	return outcome{}
}
