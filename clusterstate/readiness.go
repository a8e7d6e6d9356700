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

// NodeReadiness classifies node at now. A node that is not Ready counts as
// not started while it is younger than maxStartup, and as unready afterwards.
func NodeReadiness(node *apiv1.Node, now time.Time, maxStartup time.Duration) Readiness {
	for _, c := range node.Status.Conditions {
		if c.Type == apiv1.NodeReady && c.Status == apiv1.ConditionTrue {
			return Ready
		}
	}
	if now.Sub(node.CreationTimestamp.Time) < maxStartup {
		return NotStarted
	}
	return Unready
}

// Counts are node totals by readiness.
type Counts struct {
	Ready, Unready, NotStarted int
}

// CountReadiness classifies every node.
func CountReadiness(nodes []*apiv1.Node, now time.Time, maxStartup time.Duration) Counts {
	var c Counts
	for _, n := range nodes {
		switch NodeReadiness(n, now, maxStartup) {
		case Ready:
			c.Ready++
		case Unready:
			c.Unready++
		case NotStarted:
			c.NotStarted++
		}
	}
	return c
}
