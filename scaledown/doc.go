// Package scaledown removes nodes the cluster does not need. The planner
// marks nodes unneeded (utilisation under the threshold and every pod
// movable in the loop's simulation without breaking a PodDisruptionBudget,
// per the drain rules) and keeps the time each became unneeded in its
// DeletionCandidate taint, so restarts do not reset the clock; the
// actuator deletes empty nodes in bulk and drains the others through the
// Eviction API before deleting them with the cloud provider. It must not
// import core/ or k8s.io/kubernetes.
package scaledown
