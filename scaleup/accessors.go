package scaleup

import (
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// Simulator is the scheduler framework over the session's snapshot, for a
// planner that runs on the loop's session after the scale-up (the
// consolidation planner): it must fork the snapshot and revert its changes.
func (s *Session) Simulator() *framework.Handle { return s.o.sim }

// Template is node group id's template NodeInfo as this session built it,
// or nil when the group may not grow now (backed off, unhealthy, at its max
// size, left out by a processor, or without a template).
func (s *Session) Template(id string) *cloudprovider.NodeInfo {
	gs, ok := s.groups[id]
	if !ok || gs.skip != "" || gs.excluded {
		return nil
	}
	return gs.template
}
