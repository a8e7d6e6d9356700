package provreq

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/podutil"
)

// Pod annotations that tie a pod to a ProvisioningRequest. A pod that carries
// the consume annotation is meant to run on the capacity booked for the named
// request (in the pod's namespace). Kueue sets the current keys on every pod
// of an admitted job; the deprecated keys are still read. The consume keys
// live in the leaf package podutil, which the loop's scale-up reads too; they
// are repeated here for this package's callers.
const (
	// ConsumeAnnotation names the request whose capacity the pod uses.
	ConsumeAnnotation = podutil.ConsumeAnnotation
	// ClassAnnotation names that request's provisioning class.
	ClassAnnotation = "autoscaling.x-k8s.io/provisioning-class-name"

	// DeprecatedConsumeAnnotation is the older key of ConsumeAnnotation.
	DeprecatedConsumeAnnotation = podutil.DeprecatedConsumeAnnotation
	// DeprecatedClassAnnotation is the older key of ClassAnnotation.
	DeprecatedClassAnnotation = "cluster-autoscaler.kubernetes.io/provisioning-class-name"
)

// ConsumedRequestName returns the name of the ProvisioningRequest that obj (a
// pod, or a pod template's metadata) consumes, from the current annotation
// key or else the deprecated one; an empty value counts as absent.
func ConsumedRequestName(obj metav1.Object) (string, bool) {
	return podutil.ConsumedRequestName(obj)
}

// PodClassName returns the provisioning class annotated on obj, from the
// current annotation key or else the deprecated one.
func PodClassName(obj metav1.Object) (string, bool) {
	return annotation(obj, ClassAnnotation, DeprecatedClassAnnotation)
}

func annotation(obj metav1.Object, keys ...string) (string, bool) {
	if obj == nil {
		return "", false
	}
	ann := obj.GetAnnotations()
	for _, k := range keys {
		if v := ann[k]; v != "" {
			return v, true
		}
	}
	return "", false
}
