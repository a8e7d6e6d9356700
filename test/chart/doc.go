// Package chart tests the Helm chart in charts/cluster-autoscaler: its CRD is
// the one provreq/crd generates, it renders (with the helm binary pinned by
// hack/tools/helm) to the objects its values promise, and the RBAC it renders
// lets the real binary do its work against the real local control plane.
// The package holds tests only.
package chart
