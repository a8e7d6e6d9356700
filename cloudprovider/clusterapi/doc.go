// Package clusterapi is the cloud provider for clusters whose machines are
// managed by Cluster API: --cloud-provider=clusterapi, with --cloud-config
// naming the kubeconfig of the management cluster (empty: the autoscaled
// cluster is its own management cluster).
//
// It talks to Cluster API objects through the dynamic client only (no Cluster
// API Go types): group cluster.x-k8s.io (env CAPI_GROUP), the version the API
// server prefers (env CAPI_VERSION). Node groups are the MachineDeployments,
// the MachineSets no MachineDeployment owns and the MachinePools that carry
// both size annotations and match --node-group-auto-discovery=clusterapi:...
// A group whose annotations do not parse is logged and left out; it is never
// scaled. So is a paused one (cluster.x-k8s.io/paused), as upstream; the
// nodes of a MachineDeployment rolling out are kept by scale-down
// (cloudprovider.ScaleDownBlocker), and DeleteNodes refuses both as the API
// server has them at the time of the call (lifecycle.go). Sizes change through the scale subresource; DeleteNodes marks the
// named Machines with the delete-machine annotation, and with its own
// OwnDeletionAnnotation, before lowering the replicas so Cluster API removes
// exactly those; a Machine that carries its own mark is being deleted and
// never lowers the replicas a second time (deletion.go). Templates for scale from zero
// come from the capacity.cluster-autoscaler.kubernetes.io annotations,
// ResourceSlices included (dra-driver with gpu-count), with the taints of
// spec.template.spec.taints under the taints annotation's.
//
// Objects are watched with dynamic informers; each Refresh takes one
// consistent view of them for the loop.
//
// A node is matched to a Machine (by provider ID, else nodeRef) only within
// the autoscaler's own cluster, the Clusters of its node groups, and never
// to one its Cluster API annotations (cluster name, namespace, Machine)
// rule out; a node two Clusters' Machines could be is taken for neither
// (match.go).
//
// It owns the translation between Cluster API objects and the cloudprovider
// interfaces and must not import any other provider, nor anything of the
// autoscaler above package cloudprovider.
package clusterapi
