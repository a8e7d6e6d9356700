// Package clusterstate owns what the autoscaler knows about node groups over
// time: the readiness of nodes (ready, unready, not started, resource-unready
// accelerators), upcoming, unregistered and long-unregistered nodes, scale-ups
// in flight and their timeouts, back-off, cluster and group health, and the
// status ConfigMap. The Registry reads the cloud provider and the nodes it is
// given and never changes either; StatusWriter is its only writer, of the
// status ConfigMap. It must not import core/ or the loop's sessions
// (scaleup/, scaledown/): they read it.
package clusterstate
