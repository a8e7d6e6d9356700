package taints

// Key prefixes upstream gives a meaning: a taint under StartupPrefix or
// IgnorePrefix keeps a node counted as starting (it goes once the node is
// up); one under StatusPrefix reports a state and does not. Templates
// leave all three out.
const (
	StartupPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"
	IgnorePrefix  = "ignore-taint.cluster-autoscaler.kubernetes.io/"
	StatusPrefix  = "status-taint.cluster-autoscaler.kubernetes.io/"
)

// Keys of the disruption engine's taints. Disruption (NoSchedule) is on the
// nodes the engine is replacing or removing; ConsolidationCandidate
// (PreferNoSchedule) on the nodes the consolidation plan will remove in a
// later round, so that kube-scheduler sends new and evicted pods to the nodes
// that stay. Neither is ever on a new node: templates leave both out.
const (
	Disruption             = "cluster-autoscaler.kubernetes.io/healing"
	ConsolidationCandidate = "cluster-autoscaler.kubernetes.io/consolidation-candidate"
)

// DeletionCandidate (PreferNoSchedule) is upstream's taint on the nodes
// scale-down finds unneeded (--max-bulk-soft-taint-count); its value is
// when the node was found so.
const DeletionCandidate = "DeletionCandidateOfClusterAutoscaler"
