package scaleup

import (
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// expectSlices gives each node of gs that publishes no ResourceSlice yet,
// while its template says its nodes do, the template's slices in the
// snapshot, for as long as the node is younger than the group's
// --max-node-startup-time: its DRA drivers are still starting, and without
// their devices the pods that wait for them would look as if they needed
// another node (a second scale-up for the same pods).
func expectSlices(snap *framework.Snapshot, gs *groupState, now time.Time) {
	if len(gs.template.ResourceSlices) == 0 {
		return
	}
	for _, n := range gs.nodes {
		if now.Sub(n.CreationTimestamp.Time) >= gs.startup || len(snap.ResourceSlices(n.Name)) > 0 {
			continue
		}
		if _, err := snap.NodeInfo(n.Name); err != nil {
			continue // not in the snapshot (excluded as not started)
		}
		snap.SetResourceSlices(n.Name, framework.RenamedResourceSlices(gs.template.ResourceSlices, gs.template.Node.Name, n.Name))
	}
}
