// Package clusterapi tests the Cluster API provider against the real local
// control plane, Cluster API's own controllers (test/capi) and the binary:
// scaling MachineDeployments (from zero too, with the taints of their
// spec.template.spec), paused and rolling-out groups, and that a
// Machine's deletion lowers the replicas exactly once. Its own package (from
// test/integration/providers) so that its long waits on the controllers run
// beside the other providers' tests.
package clusterapi
