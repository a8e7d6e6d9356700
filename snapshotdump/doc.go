// Package snapshotdump is the format of the /snapshotz dump
// (DebuggingSnapshot): the cluster as one loop observed it, and what the
// cloud provider told the loop. It is data only: package core fills it and
// serves it, `cluster-autoscaler explain --snapshot` (explain/offline) reads
// it, and neither needs the other. It imports the Kubernetes API types,
// cloudprovider (instance states, GPU configs) and config (a group's
// options) only.
package snapshotdump
