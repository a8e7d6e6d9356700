// Package healing replaces failed worker nodes (--node-healing-enabled):
// a node whose condition matches a policy for long enough, or that carries
// the heal annotation, is cordoned, drained through the Eviction API,
// deleted by name through its node group and replaced by a new node of the
// same group, with optional HTTP hooks before (heal_start) and after
// (heal_end). The Healer is a processors.RepairProcessor: it runs in the
// loop after cleanup, only in a healthy cluster.
//
// Every heal in flight is recorded, phase by phase, in the ConfigMap
// cluster-autoscaler-healing of --namespace, so a restarted or newly elected
// autoscaler resumes it where it stopped and never deletes a node twice.
package healing
