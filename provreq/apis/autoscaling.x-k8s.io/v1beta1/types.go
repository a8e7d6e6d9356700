package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProvisioningRequest asks for capacity for a set of pods, described by
// PodTemplates in the same namespace, before those pods are created. The
// provisioning class decides how the autoscaler answers, and the answer is
// written as status conditions.
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion:warning="autoscaling.k8s.io/v1beta1 API is deprecated"
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=provreq;provreqs
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ProvisioningRequest struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	//
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what is asked for. It cannot be changed once created: to ask
	// for something else, delete the object and create a new one.
	//
	// +kubebuilder:validation:Required
	Spec ProvisioningRequestSpec `json:"spec"`

	// Status is the autoscaler's answer so far.
	//
	// +optional
	Status ProvisioningRequestStatus `json:"status,omitempty"`
}

// ProvisioningRequestSpec describes the pods to find room for and how.
type ProvisioningRequestSpec struct {
	// PodSets lists groups of identical pods, each given by a PodTemplate
	// and a number of replicas. Immutable.
	//
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	PodSets []PodSet `json:"podSets"`

	// ProvisioningClassName selects the way capacity is provisioned, for
	// example check-capacity.autoscaling.x-k8s.io or
	// best-effort-atomic-scale-up.autoscaling.x-k8s.io. An autoscaler leaves
	// requests of classes it does not know alone. Immutable.
	//
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	ProvisioningClassName string `json:"provisioningClassName"`

	// Parameters tune the provisioning class; their meaning is the class's.
	// Keys a class does not know are ignored. Immutable.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	Parameters map[string]Parameter `json:"parameters,omitempty"`
}

// Parameter is the value of one provisioning-class parameter.
//
// +kubebuilder:validation:MaxLength=255
type Parameter string

// PodSet is a number of pods built from one PodTemplate.
type PodSet struct {
	// PodTemplateRef names the PodTemplate, in the request's namespace, that
	// the pods are made from.
	//
	// +kubebuilder:validation:Required
	PodTemplateRef Reference `json:"podTemplateRef"`

	// Count is how many pods of this template are asked for.
	//
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
}

// Reference names an object in the same namespace.
type Reference struct {
	// Name of the referenced object.
	//
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// ProvisioningRequestStatus is the observed state of a ProvisioningRequest.
type ProvisioningRequestStatus struct {
	// Conditions report progress and outcome: Accepted, Provisioned,
	// Failed, BookingExpired and CapacityRevoked. The list is a map keyed by
	// the condition type, so several writers can each own their conditions
	// with server-side apply.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ProvisioningClassDetails carries class-specific facts about the
	// provisioned capacity, for example a label that the new nodes carry.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	ProvisioningClassDetails map[string]Detail `json:"provisioningClassDetails,omitempty"`
}

// Detail is the value of one class-specific status detail.
//
// +kubebuilder:validation:MaxLength=32768
type Detail string

// ProvisioningRequestList is a list of ProvisioningRequests.
//
// +kubebuilder:object:root=true
type ProvisioningRequestList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	//
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ProvisioningRequests.
	Items []ProvisioningRequest `json:"items"`
}
