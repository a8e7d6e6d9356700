// Package whatif turns manifests (Deployments, ReplicaSets, StatefulSets,
// Jobs, bare Pods) into the pending pods they would make if created now,
// and reads ProvisioningRequests with their PodTemplates,
// for `cluster-autoscaler explain -f`. Each object's pods share an owner,
// so that the loop groups them as it groups a real controller's pods. It
// imports the Kubernetes API types and machinery and the ProvisioningRequest
// API types, nothing of the loop.
package whatif
