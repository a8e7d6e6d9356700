// Package consolidation is the consolidation planner of the disruption
// engine (issue 40, reason disruption.Consolidatable): a pure decision that,
// given one loop's scheduler simulation (the scale-up session's forkable
// snapshot), the node groups with their templates and sizes and the
// provider's prices, proposes disruption.Candidate values the engine carries
// out (replacement first, drain one pod at a time as the
// PodDisruptionBudgets allow, deletion by name).
//
// Every node is considered, whatever its utilisation, unless it is
// protected (see the Reason* constants): scale-down-disabled, Karpenter's
// do-not-disrupt on the node or on one of its pods, a pod the drain rules do
// not let move, younger than the settle time, in a group at its min size,
// already being deleted, not Ready, or holding capacity the loop booked.
// A PodDisruptionBudget never makes a node impossible: the engine evicts one
// pod at a time and waits for the budget, so several pods of one budget on
// a node are fine. A pod whose budget allows no disruption now only makes
// its node a worse candidate (it counts Options.PDBBlockedPodWeight pods).
//
// The plan, deterministic for the same input within its work budget:
//
//  1. delete-only: candidates in order of value (price per hour per pod
//     to move, a pod behind an exhausted PDB counting more; sizes stand in
//     for prices when there are none), each removed in the simulation when
//     its pods (and the pods earlier removals moved onto it) fit, with
//     every PreFilter and Filter plugin, on the nodes that stay. Pods look
//     for room on the nodes least likely to go first: the nodes that are
//     no candidate, then the candidates from the last to the first. The
//     removals accumulate, so all delete-only candidates fit together, and
//     since one removal only takes room from the next ones, each also fits
//     without the others (up to inter-pod affinity to a moved pod);
//  2. replacement (with prices only): for each group with a template and
//     room, one new template node is added and the remaining candidates,
//     the most price per share of that node their pods would take first
//     (a knapsack's greedy), are removed onto the rest plus that node (at
//     most Options.MaxNodesPerReplacement); the group saving most, above
//     the threshold, wins: k nodes replaced by one node of that group
//     (k = 1: one node replaced by a cheaper one). The new node then serves
//     only that candidate. This repeats up to Options.MaxReplacements
//     times.
//
// Before both, the nodes being deleted (Input.Deleting, the ToBeDeleted
// taint) leave the simulation and the pods their drains evict are placed
// where they fit: the candidates do not count on the room those take.
//
// SavingPerHour is the price of the removed nodes minus the replacement's,
// over the hour from Input.Now; unpriced nodes count 0. A replacement
// takes priced nodes only, to a group whose template is priced.
//
// Removals never take a group below its min size, counting every candidate
// of the plan together; replacements never take a group above its max.
// The snapshot is left as it was found (Fork at the start, Revert at the
// end).
//
// It must not import core/, scaledown/ or scaleup/ (the caller hands it the
// session's framework handle), and must not call the API server or a
// provider's mutating methods.
package consolidation
