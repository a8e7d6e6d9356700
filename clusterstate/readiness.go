package clusterstate

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
)

// Readiness is the state of one registered node.
type Readiness int

// Node states, as counted in nodes_count and the status ConfigMap.
const (
	Ready Readiness = iota
	Unready
	NotStarted
)

// startupTaints keep pods off a node whose Ready condition may already be
// true: until the node lifecycle controller or the cloud controller lifts
// them, the node cannot take pods and has not really started.
var startupTaints = []string{
	"node.kubernetes.io/not-ready",
	"node.kubernetes.io/unreachable",
	"node.cloudprovider.kubernetes.io/uninitialized",
}

// NodeReadiness classifies node at now. A node is Ready when its Ready
// condition is true and no startup taint keeps pods off it; otherwise it
// counts as not started while younger than maxStartup, and unready after.
func NodeReadiness(node *apiv1.Node, now time.Time, maxStartup time.Duration) Readiness {
	if readyCondition(node) && !hasStartupTaint(node) {
		return Ready
	}
	if now.Sub(node.CreationTimestamp.Time) < maxStartup {
		return NotStarted
	}
	return Unready
}

func readyCondition(node *apiv1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

func hasStartupTaint(node *apiv1.Node) bool {
	for _, t := range node.Spec.Taints {
		for _, key := range startupTaints {
			if t.Key == key {
				return true
			}
		}
	}
	return false
}
