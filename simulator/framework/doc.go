// Package framework runs the real kube-scheduler framework (the default
// in-tree plugin registry and profile, or --scheduler-config-file) against an
// in-memory, forkable cluster Snapshot. It is the only package of this module
// that imports k8s.io/kubernetes; everything else asks it questions in terms
// of core/v1 objects. The Snapshot lives here because it stores the
// scheduler's own NodeInfo values. It also holds the DRA objects
// (ResourceSlices, ResourceClaims, DeviceClasses; see WithDRA) behind the
// framework's SharedDRAManager: placing a pod with claims allocates them on
// the snapshot's copies, removing it (RemovePod, RemoveNode) releases them as
// the resourceclaim controller would, and Revert undoes both with everything
// else.
package framework
