// Package lifecycle owns two reason sources of the disruption engine (issue
// 40), the nodes that go because of how old they are or what they were made
// from rather than because of their load:
//
//   - Expiry (disruption.Expired): a node whose age, from its Node's
//     creationTimestamp, has reached its group's maximum lifetime (a default,
//     0 for off, and a per-group LifetimeFunc the caller wires). It is
//     evaluated every loop against loop.Now, so a node is proposed in the
//     first loop at or after its creation time plus the lifetime.
//   - Drift (disruption.Drifted): a node its group reports drifted through
//     cloudprovider.DriftDetector (a group made from another template now);
//     an error means not drifted. Groups without DriftDetector never drift.
//   - RunLimit (disruption.MaxRunDuration): a node an all-or-nothing
//     ProvisioningRequest's scale-up made, once the request's
//     maxRunDurationSeconds passed and its capacity was revoked: when none of
//     the request's pods is left on it, or at the end of the grace. It is
//     not replaced, and it is proposed only if the request's records name it
//     and it existed when the request was provisioned.
//   - ReservationEnd (disruption.ReservationEnding): a node of a group whose
//     reserved capacity ends at a fixed time (cloudprovider.ReservationEnder:
//     an EC2 Capacity Block), from a set time before the end on. It is not
//     replaced in its group; its pods go to other groups.
//
// Each expiry or drift candidate is one node, replaced by one new node of its own group
// (replace first: the engine drains the old node once the new one is
// Ready). Both sources skip nodes without a node group, nodes being deleted
// (a deletion timestamp or the autoscaler's ToBeDeletedByClusterAutoscaler
// taint) and nodes that are not Ready: those are node healing's, under its
// breaker, and a source that replaced them would go around it. Candidates
// come oldest first. Protections (do-not-disrupt, scale-down-disabled,
// settle time, PDBs), budgets and the choice between reasons are the
// engine's, not the sources'.
//
// Sources are pure decisions over the loop's facts and the provider's
// read-only answers (NodeGroupForNode, Drifted, and whatever the
// LifetimeFunc reads): they call no mutating provider method and not the API
// server. Besides the contract (disruption, processors) and cloudprovider,
// it must not import directly the engine's code, core/, scaledown/,
// clusterstate/, healing/ or client-go (the contract's processors package
// brings some of them in transitively; that is the contract's weight, not a
// licence to use them).
package lifecycle
