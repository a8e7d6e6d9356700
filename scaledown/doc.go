// Package scaledown removes nodes the cluster does not need. The planner
// marks nodes unneeded (utilisation under the threshold, an accelerator
// node's that of its devices, see devices.go, and every pod
// movable in the loop's simulation without breaking a PodDisruptionBudget,
// per the drain rules; empty nodes first, then the previous candidates,
// then new ones drawn in rotation within upstream's candidate limits,
// recheck timeout and simulation time budget, see candidates.go), keeps the
// time each became unneeded in memory and
// in its DeletionCandidate taint (so restarts do not reset the clock, unless
// soft taints are off), and picks the removable ones within each group's
// room above its min size, counting the removals in flight, and above the
// minimums (--cores-total, --memory-total, --gpu-total and a fork's, see
// minimums.go), counting the loop's removals together; a
// zeroOrMaxNodeScaling group goes whole or not at all. The actuator runs
// each removal in the background on the loop's context: ToBeDeleted taint,
// the delay after tainting, a drain through the Eviction API (in priority
// rounds with --drain-priority-config), the delay-deletion annotations, a
// re-check of the node's pods against the API server, then the cloud
// provider's DeleteNodes (a group's deletions gathered over
// --node-deletion-batcher-interval). With the disruption engine on, its
// Ledger admits each removal job before it starts and is told its phases and
// end (ledger.go): scale-down is the engine's delete-only case. It must not
// import core/, disruption/ or k8s.io/kubernetes.
package scaledown
