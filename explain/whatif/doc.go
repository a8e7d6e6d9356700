// Package whatif turns manifests (Deployments, ReplicaSets, StatefulSets,
// Jobs, bare Pods) into the pending pods they would make if created now,
// for `cluster-autoscaler explain -f`. Each object's pods share an owner,
// so that the loop groups them as it groups a real controller's pods. It
// imports the Kubernetes API types and machinery, nothing of the loop.
package whatif
