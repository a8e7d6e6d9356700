package capacitybuffer

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// StrategyActiveCapacity is the provisioning strategy this autoscaler
// handles, the API's default: room for the buffer's pods is kept on nodes
// that run. Buffers of other strategies are another controller's.
const StrategyActiveCapacity = "buffer.x-k8s.io/active-capacity"

// Condition types, as upstream's.
const (
	// ConditionReadyForProvisioning is the controller's: the spec was
	// translated into status.podTemplateRef and status.replicas.
	ConditionReadyForProvisioning = "ReadyForProvisioning"
	// ConditionLimitedByQuotas is the controller's: ResourceQuotas of the
	// namespace cut the buffer's replicas.
	ConditionLimitedByQuotas = "LimitedByQuotas"
	// ConditionProvisioning is the loop's: pods of the buffer are injected
	// into the scale-up.
	ConditionProvisioning = "Provisioning"
)

// Reasons of ReadyForProvisioning and LimitedByQuotas. The first two are
// upstream's; upstream gives every failure the reason "error", this
// autoscaler a reason per cause.
const (
	ReasonAttributesSetSuccessfully = "AttributesSetSuccessfully"
	ReasonResourceQuotasAllocated   = "ResourceQuotasAllocated"
	// ReasonInvalidSpec: the spec contradicts itself (both or neither
	// reference, a negative count, nothing to count chunks by, limits that
	// name no resource a pod requests).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonPodTemplateNotFound: spec.podTemplateRef names no PodTemplate.
	ReasonPodTemplateNotFound = "PodTemplateNotFound"
	// ReasonScalableRefNotFound: spec.scalableRef names a kind the API
	// server does not serve, or no object of it.
	ReasonScalableRefNotFound = "ScalableRefNotFound"
	// ReasonScalableRefUnsupported: the object has no scale subresource,
	// or neither a pod template nor a pod to copy one from.
	ReasonScalableRefUnsupported = "ScalableRefUnsupported"
	// ReasonPodDryRunFailed: the server dry-run of the buffer's pod was
	// refused (--capacity-buffer-pod-dry-run-enabled).
	ReasonPodDryRunFailed = "PodDryRunFailed"
	// ReasonPodTemplateNotWritten: the PodTemplate the controller keeps
	// for the buffer could not be written.
	ReasonPodTemplateNotWritten = "PodTemplateNotWritten"
	// ReasonPodOwnerNotRead (a Warning event; the buffer stays translated):
	// the template of a scalableRef's object without spec.template is its
	// newest pod's controller's, and that controller could not be read, so
	// the pod's own spec, as the API server returns it, was used instead.
	ReasonPodOwnerNotRead = "PodOwnerNotRead"
)

// Reasons of Provisioning, as upstream's.
const (
	ReasonFakePodsInjected        = "FakePodsInjected"
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	ReasonBufferIsEmpty           = "BufferIsEmpty"
	ReasonFailedToGetPodTemplate  = "FailedToGetPodTemplate"
)

// The annotation that marks the pods injected for a buffer, as upstream's.
// Such pods exist only in the loop's simulation, never in the API.
const (
	FakePodAnnotation      = "podType"
	FakePodAnnotationValue = "capacityBufferFakePod"
)

// IsFakePod reports whether pod was injected for a buffer.
func IsFakePod(pod *apiv1.Pod) bool {
	return pod != nil && pod.Annotations[FakePodAnnotation] == FakePodAnnotationValue
}

// Strategy returns the buffer's provisioning strategy, the default when the
// spec leaves it empty.
func Strategy(spec v1.CapacityBufferSpec) string {
	if spec.ProvisioningStrategy == nil || *spec.ProvisioningStrategy == "" {
		return StrategyActiveCapacity
	}
	return *spec.ProvisioningStrategy
}

// Handled reports whether this autoscaler provisions the buffer: its
// strategy is active capacity.
func Handled(b *v1.CapacityBuffer) bool {
	return Strategy(b.Spec) == StrategyActiveCapacity
}

// Ready reports whether the controller translated the buffer: its
// ReadyForProvisioning condition is true and the status names a template
// and a number of replicas.
func Ready(b *v1.CapacityBuffer) bool {
	return meta.IsStatusConditionTrue(b.Status.Conditions, ConditionReadyForProvisioning) &&
		b.Status.PodTemplateRef != nil && b.Status.PodTemplateRef.Name != "" && b.Status.Replicas != nil
}

// SameCondition reports whether two conditions say the same (type, status,
// reason, message), whatever their times.
func SameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration
}

// Reference is the object reference of a buffer, for events.
func Reference(b *v1.CapacityBuffer) *apiv1.ObjectReference {
	return &apiv1.ObjectReference{APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind,
		Namespace: b.Namespace, Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion}
}
