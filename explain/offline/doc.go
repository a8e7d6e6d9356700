// Package offline answers the loop's questions from a /snapshotz dump
// (snapshotdump.DebuggingSnapshot) instead of the cluster and the cloud, for
// `cluster-autoscaler explain --snapshot`: a cloud provider whose node
// groups are the dump's (sizes, instances, templates, prices) and the
// dump's objects for an in-memory client. It imports the dump's format
// (snapshotdump), cloudprovider and config; not core, which writes the dump,
// and nothing of the loop imports it.
package offline
