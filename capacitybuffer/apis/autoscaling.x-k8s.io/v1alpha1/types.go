package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacityBuffer asks for spare capacity: room for a number of pods of a
// given shape, kept free on top of what the cluster's workloads use, so that
// new pods start without waiting for a node. A controller turns the spec into
// a pod template and a pod count (the status); an autoscaler provisions room
// for that many pods of that template.
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion:warning="autoscaling.x-k8s.io/v1alpha1 CapacityBuffer is deprecated; use v1beta1"
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".status.provisioningStrategy",description="How the buffer is provisioned."
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="Pods of room the buffer holds."
// +kubebuilder:printcolumn:name="PodTemplate",type="string",JSONPath=".status.podTemplateRef.name",description="The PodTemplate the room is shaped by."
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='ReadyForProvisioning')].status",description="Whether the spec was translated."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type CapacityBuffer struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	//
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the spare capacity asked for.
	//
	// +kubebuilder:validation:Required
	Spec CapacityBufferSpec `json:"spec"`

	// Status is the controller's translation of the spec and the
	// autoscaler's progress.
	//
	// +optional
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// Name of the object.
	//
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ScalableRef names an object of the buffer's namespace that has a scale
// subresource, such as a Deployment, ReplicaSet or StatefulSet.
type ScalableRef struct {
	// APIGroup of the object; empty for the core group.
	//
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the object, for example Deployment.
	//
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the object.
	//
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// CapacityBufferSpec is the spare capacity asked for: the shape of one
// chunk (a pod template, given directly or through a scalable object) and
// how many chunks.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="set either podTemplateRef or scalableRef, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="with podTemplateRef, set replicas or limits"
type CapacityBufferSpec struct {
	// ProvisioningStrategy says how the buffer is provisioned.
	// buffer.x-k8s.io/active-capacity, the default, keeps room for the
	// buffer's pods on running nodes.
	//
	// +optional
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`

	// PodTemplateRef names the PodTemplate, in the buffer's namespace, that
	// one chunk of the buffer is shaped like. Set it or scalableRef.
	//
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`

	// ScalableRef names an object with a scale subresource whose pods one
	// chunk is shaped like; percentage is taken of its replicas. Set it or
	// podTemplateRef.
	//
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`

	// Replicas is the number of chunks. With percentage also set, the
	// larger of the two counts.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Percentage is the number of chunks as a percentage of scalableRef's
	// replicas, rounded up, and at least one. It needs scalableRef.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Percentage *int32 `json:"percentage,omitempty"`

	// Limits caps the buffer's total requests: the chunks are as many as
	// fit within every limit the chunk's pod requests. Without replicas and
	// percentage, the buffer is as many chunks as fit.
	//
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// CapacityBufferStatus is what the controller translated the spec into, and
// the conditions of the buffer.
type CapacityBufferStatus struct {
	// PodTemplateRef names the PodTemplate the buffer's pods are built
	// from: spec.podTemplateRef, or one the controller keeps for the buffer.
	//
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`

	// Replicas is the number of chunks to provision.
	//
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of chunks that have room on existing
	// nodes: in the autoscaler's last loop, that many of the buffer's pods
	// were placed on registered nodes, not on nodes still to come. Written
	// by the autoscaler only with --capacity-buffer-ready-replicas-enabled.
	//
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// PodTemplateGeneration is the generation of the PodTemplate that
	// replicas was computed from.
	//
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`

	// Conditions: ReadyForProvisioning (the spec was translated),
	// LimitedByQuotas and Provisioning (the autoscaler provisions it). The
	// list is a map keyed by type, so each writer owns its conditions with
	// server-side apply.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ProvisioningStrategy is the strategy the translation is for.
	//
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffers.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	//
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the CapacityBuffers.
	Items []CapacityBuffer `json:"items"`
}
