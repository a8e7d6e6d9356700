package itest

import (
	"strings"

	apiv1 "k8s.io/api/core/v1"
)

// NodeReady reports whether n's Ready condition is True.
func NodeReady(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

// CountLines counts the lines of log that contain substr.
func CountLines(log, substr string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}
