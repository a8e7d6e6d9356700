// Package capi is test-only Cluster API machinery for the integration tests
// of the clusterapi cloud provider: it installs Cluster API's CRDs from the Go
// module cache of sigs.k8s.io/cluster-api and runs a tiny stand-in for Cluster
// API's controllers that turns MachineDeployments into MachineSets, Machines
// and kwok-managed Nodes. It is not Cluster API: no infrastructure, no
// bootstrap, no rollouts, no webhooks. It must not be imported by anything
// outside test/.
package capi
