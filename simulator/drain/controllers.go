package drain

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Controller kinds whose pods are recreated elsewhere after an eviction and
// that the listers can look up.
const (
	kindReplicationController = "ReplicationController"
	kindReplicaSet            = "ReplicaSet"
	kindStatefulSet           = "StatefulSet"
	kindJob                   = "Job"
	kindDaemonSet             = "DaemonSet"
)

// isReplicatingKind reports whether a controller of this kind recreates its
// pods elsewhere. Like upstream, the kind alone decides, whatever the API
// group (so a third-party "StatefulSet" counts); only the lookup needs the
// group to match a lister's.
func isReplicatingKind(kind string) bool {
	switch kind {
	case kindReplicationController, kindReplicaSet, kindStatefulSet, kindJob:
		return true
	}
	return false
}

// controllerLookup is what the listers say about a pod's controller.
type controllerLookup struct {
	// found is false only when a lister positively misses the controller
	// (or holds another object of that name, a different UID).
	found bool
	// replicas is the desired replica count of a ReplicationController or
	// ReplicaSet that was found; nil when unknown or not applicable.
	replicas *int32
}

// lookUpController finds ref, the controller of a pod in namespace ns, in the
// listers. A kind or group we have no lister for, or a nil lister, counts as
// found: the listers cannot tell. Errors other than "not found" are returned.
func (l Listers) lookUpController(ns string, ref *metav1.OwnerReference) (controllerLookup, error) {
	unknown := controllerLookup{found: true}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		// A malformed apiVersion names no kind we have a lister for.
		return unknown, nil
	}
	var (
		obj      metav1.Object
		replicas *int32
	)
	switch {
	case ref.Kind == kindReplicationController && gv.Group == "" && l.ReplicationControllers != nil:
		rc, getErr := l.ReplicationControllers.ReplicationControllers(ns).Get(ref.Name)
		err = getErr
		if rc != nil {
			obj, replicas = rc, desiredReplicas(rc.Spec.Replicas)
		}
	case ref.Kind == kindReplicaSet && gv.Group == "apps" && l.ReplicaSets != nil:
		rs, getErr := l.ReplicaSets.ReplicaSets(ns).Get(ref.Name)
		err = getErr
		if rs != nil {
			obj, replicas = rs, desiredReplicas(rs.Spec.Replicas)
		}
	case ref.Kind == kindStatefulSet && gv.Group == "apps" && l.StatefulSets != nil:
		ss, getErr := l.StatefulSets.StatefulSets(ns).Get(ref.Name)
		err = getErr
		if ss != nil {
			obj = ss
		}
	case ref.Kind == kindJob && gv.Group == "batch" && l.Jobs != nil:
		job, getErr := l.Jobs.Jobs(ns).Get(ref.Name)
		err = getErr
		if job != nil {
			obj = job
		}
	default:
		return unknown, nil
	}
	switch {
	case apierrors.IsNotFound(err):
		return controllerLookup{}, nil
	case err != nil:
		return controllerLookup{}, fmt.Errorf("getting %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
	case obj == nil || !sameUID(ref.UID, obj.GetUID()):
		return controllerLookup{}, nil
	}
	return controllerLookup{found: true, replicas: replicas}, nil
}

// desiredReplicas applies the API default of one replica to an unset count.
func desiredReplicas(n *int32) *int32 {
	if n != nil {
		return n
	}
	one := int32(1)
	return &one
}

// sameUID is false only when both UIDs are known and differ: the object of
// that name was recreated, and the pod's controller is gone.
func sameUID(refUID, objUID types.UID) bool {
	return refUID == "" || objUID == "" || refUID == objUID
}

// controllerRefOf returns the owner reference with controller=true, if any.
func controllerRefOf(pod *apiv1.Pod) *metav1.OwnerReference {
	return metav1.GetControllerOf(pod)
}
