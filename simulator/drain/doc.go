// Package drain decides, for the pods of a node that scale-down wants to
// remove, which pods must be moved (and evicted), which are left on the node
// (DaemonSet, mirror, terminal and long-terminating pods), and whether some pod
// forbids the removal, with one of upstream's blocking reasons.
//
// It owns the drainability rules, one file per rule, applied in upstream's
// order (see Rules), and the per-decision PodDisruptionBudget bookkeeping
// (PDBs). It is pure logic: objects come in through informer listers and
// arguments, time comes in as an argument. It must not import
// k8s.io/kubernetes and must not do I/O (no clients, no API calls).
package drain
