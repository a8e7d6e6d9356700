// Package v1 holds the Go types of the autoscaling.x-k8s.io/v1
// ProvisioningRequest API, the storage version of the CRD, with the
// kubebuilder markers that generate its schema and deep-copy functions (see
// hack/update-codegen.sh). The JSON shape is the upstream API's, so objects
// written by other clients (for example Kueue) round-trip unchanged. It holds
// data only: it must not import anything of this repository.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1
