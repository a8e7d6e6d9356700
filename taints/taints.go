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
