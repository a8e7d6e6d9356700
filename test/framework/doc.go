// Package framework makes integration tests against the real local control
// plane read like unit tests: Main (from TestMain) starts one control plane
// per test package, or reuses the one named by $LOCAL_CLUSTER_KUBECONFIG;
// New gives each test a client and its own namespace, removed at the end.
package framework
