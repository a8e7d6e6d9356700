package cloudprovider

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
)

// DriftDetector is implemented by a NodeGroup that can tell whether one of
// its nodes was made from another template than the one the group would use
// for a new node now (a changed launch template or its version, launch
// configuration, instance type, or a provider's own template). The
// disruption engine replaces drifted nodes when --drift is on (issue 40).
// Unsure means not drifted: a node the group cannot identify, or whose
// origin it cannot read, is reported as not drifted, with the error.
type DriftDetector interface {
	// Drifted reports whether node was made from an older template, and
	// what differs ("launch template lt-1 version 3, now 4").
	Drifted(ctx context.Context, node *apiv1.Node) (drifted bool, why string, err error)
}
