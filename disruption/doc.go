// Package disruption is the one engine that removes and replaces nodes, for
// every reason a node goes (issue 40): unhealthy (node healing), empty or
// underutilized (scale-down, the delete-only case), consolidatable, drifted,
// expired and interrupted. Reason sources (the healing triggers, the
// consolidation planner in disruption/consolidation, drift and expiry in
// disruption/lifecycle, a provider's interruption notices) propose
// Candidates; the engine filters them (protections, budgets per node group
// and per reason), asks for the replacement first, drains by eviction as the
// PodDisruptionBudgets allow, deletes by name, and records every phase so
// that a new leader resumes it.
//
// The types of this file are the contract between the sources and the
// engine. Sources are pure decisions over the loop's facts: they never call
// the API server or the cloud provider's mutating methods. Only the engine
// acts. It must not import core/ or scaledown/.
package disruption
