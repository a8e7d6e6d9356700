// Package estimator answers "how many nodes of this template do these
// pending pods need". It groups equivalent pods (same controller, same
// scheduling-relevant spec), learns with the real scheduler Filter plugins how
// many pods of a group fit one template node, and counts the rest
// arithmetically; only groups whose pods interact with each other (inter-pod
// affinity and anti-affinity, topology spread, host ports) are simulated pod
// by pod. It is a pure function of the snapshot it is given: it forks it and
// reverts. It must not call the API server or the cloud provider.
package estimator
