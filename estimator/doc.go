// Package estimator answers "how many nodes of this template do these
// pending pods need". It groups equivalent pods (same controller, same
// scheduling-relevant spec), learns with the real scheduler Filter plugins how
// many pods of a group fit one template node, and counts the rest
// arithmetically. Nodes filled alike are kept as node classes (one snapshot
// node and a multiplicity), so later groups ask the plugins once per class
// rather than once per node; the results are those of placing the pods one by
// one, first fit. That shortcut is taken only where every enabled Filter
// plugin provably judges all pods of a group alike on a class node
// (framework.Handle.PodByPodReason); groups whose pods interact (inter-pod
// affinity and anti-affinity, topology spread of their own or from the
// profile's default constraints, host ports), use claims or ephemeral volumes
// (attach limits, ReadWriteOncePod, volume binding), or meet a plugin not
// known to be pod-local are simulated pod by pod, on every node made real. It is a pure function of the snapshot it
// is given: it forks it and reverts. It must not call the API server or the
// cloud provider.
package estimator
