// Package v1beta1 holds the Go types of the deprecated
// autoscaling.x-k8s.io/v1beta1 ProvisioningRequest API. Its schema is the
// same as v1's, so the API server serves one stored object under both
// versions without a conversion webhook; new code should use v1. It holds
// data only: it must not import anything of this repository.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1
