// Package v1alpha1 holds the Go types of the deprecated
// autoscaling.x-k8s.io/v1alpha1 CapacityBuffer API. Its schema is v1beta1's,
// so the API server serves one stored object under both versions without a
// conversion webhook, and buffers created while upstream served v1alpha1
// keep working; new code should use v1beta1. It holds data only: it must not
// import anything of this repository.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1alpha1
