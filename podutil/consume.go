package podutil

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod that carries the consume annotation is meant to run on the capacity
// booked for the named ProvisioningRequest (in the pod's namespace). Kueue
// sets the current key on every pod of an admitted job; the deprecated key
// is still read.
const (
	// ConsumeAnnotation names the request whose capacity the pod uses.
	ConsumeAnnotation = "autoscaling.x-k8s.io/consume-provisioning-request"
	// DeprecatedConsumeAnnotation is the older key of ConsumeAnnotation.
	DeprecatedConsumeAnnotation = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
)

// ConsumedRequestName returns the name of the ProvisioningRequest that obj (a
// pod, or a pod template's metadata) consumes, from the current annotation
// key or else the deprecated one; an empty value counts as absent.
func ConsumedRequestName(obj metav1.Object) (string, bool) {
	if obj == nil {
		return "", false
	}
	ann := obj.GetAnnotations()
	for _, k := range []string{ConsumeAnnotation, DeprecatedConsumeAnnotation} {
		if v := ann[k]; v != "" {
			return v, true
		}
	}
	return "", false
}
