// Package scan reads a cluster autoscaler's Go source, without compiling it,
// for what an operator sees of it: the flags and their defaults, the metric
// families (name, type, labels, buckets, series set at start-up), the labels
// of the function duration metrics, and the reasons of the events it records.
//
// It is the reader behind hack/upstreamlist (upstream's source, from a git
// mirror) and behind cluster-autoscaler's TestUpstreamList (our own source,
// for the event reasons). It understands the shapes the code uses, not Go in
// general: what it cannot evaluate it reports as unresolved.
//
// It imports the standard library only.
package scan
