// Package capi runs Cluster API for the integration tests of the clusterapi
// cloud provider: Cluster API's own CRDs (from the module cache of
// sigs.k8s.io/cluster-api) and its own core controller manager (built from
// the Go module proxy into _output/bin/cluster-api by hack/build-tools.sh),
// which reconciles Clusters, MachineDeployments, MachineSets and Machines.
//
// What is not Cluster API is the provider side, kept as small as the
// contract allows: test CRDs for an infrastructure cluster, a control plane
// and infrastructure machines (and their template), and Infra, a controller
// that plays the cloud and the kubelet: for each infrastructure machine it
// creates a kwok-managed Node and reports the machine provisioned with that
// Node's provider ID (or reports it failed, when its template says so).
// Bootstrap data is a fixed secret name, so no bootstrap provider runs.
//
// It must not be imported by anything outside test/.
package capi
