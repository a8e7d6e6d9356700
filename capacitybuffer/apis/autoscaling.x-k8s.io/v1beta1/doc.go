// Package v1beta1 holds the Go types of the autoscaling.x-k8s.io/v1beta1
// CapacityBuffer API, the storage version of the CRD, with the kubebuilder
// markers that generate its schema and deep-copy functions (see
// hack/update-codegen.sh). The JSON shape is the upstream API's, so buffers
// written for the upstream autoscaler are read unchanged. It holds data
// only: it must not import anything of this repository.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1
