package cloudprovider

import "context"

// ScaleDownBlocker is implemented by a NodeGroup whose nodes must, for a
// while, not be removed by scale-down although the group is autoscaled (a
// Cluster API MachineDeployment in the middle of a rollout). The scale-down
// planner asks it once per group and loop and keeps every node of a blocked
// group, with the reason; scale-up is not affected. A provider that
// implements it should also refuse DeleteNodes while the group is blocked.
type ScaleDownBlocker interface {
	// ScaleDownBlocked says why no node of the group may be removed now,
	// or "" when they may.
	ScaleDownBlocked(ctx context.Context) string
}
