package builder

import (
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// NewReadiness answers the disruption engine's question whether a node
// whose Ready condition is true is ready as the cluster state judges it
// (disruption.Options.Readiness): not while a startup taint of taints is
// on it (the rule clusterstate's readiness follows), nor while it is among
// its group's ResourceUnreadyNodes of the registry's last Update (the DRA
// ResourceSlices of its group's template, or its GPU extended resource,
// not there yet).
func NewReadiness(state *clusterstate.Registry, taints clusterstate.Taints) disruption.Readiness {
	return readiness{state: state, taints: taints}
}

type readiness struct {
	state  *clusterstate.Registry
	taints clusterstate.Taints
}

// NotReadyYet implements disruption.Readiness.
func (r readiness) NotReadyYet(group string, node *apiv1.Node) bool {
	// The time is irrelevant: only Ready (condition true, no startup
	// taint) or not is read.
	if r.taints.NodeReadiness(node, time.Time{}, 0) != clusterstate.Ready {
		return true
	}
	gs := r.state.Group(group)
	return gs != nil && slices.Contains(gs.ResourceUnreadyNodes, node.Name)
}
