// Package offline answers the loop's questions from a /snapshotz dump
// (core.DebuggingSnapshot) instead of the cluster and the cloud, for
// `cluster-autoscaler explain --snapshot`: a cloud provider whose node
// groups are the dump's (sizes, instances, templates, prices) and the
// dump's objects for an in-memory client. It imports core for the dump's
// types and cloudprovider; nothing of the loop imports it.
package offline
