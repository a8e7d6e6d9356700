package scaleup

import (
	"context"
	"strings"

	apiv1 "k8s.io/api/core/v1"
)

// PodsOn returns the pods the session's snapshot has on node: its real pods
// plus any pod a booking or a pending pod was placed there. Pods placed by
// counting (Place, FitAll, the pending pods that fit) are the pending pods
// themselves, without a node name.
func (s *Session) PodsOn(node string) []*apiv1.Pod {
	pods, err := s.o.sim.Snapshot().Pods(node)
	if err != nil {
		return nil
	}
	return pods
}

// TryRemove simulates removing node: its pods to move must each fit another
// registered node (not an upcoming one, not one in avoid). When they all
// fit, the removal is kept in the session, so a later candidate cannot
// count on the same room, and true is returned; otherwise nothing changes.
func (s *Session) TryRemove(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool {
	snap := s.o.sim.Snapshot()
	snap.Fork()
	if err := snap.RemoveNode(node); err != nil {
		snap.Revert()
		return false
	}
	accept := func(n string) bool { return !strings.HasPrefix(n, upcomingPrefix) && !avoid[n] }
	for _, p := range move {
		moved := p.DeepCopy()
		moved.Spec.NodeName = ""
		dest, err := s.o.sim.FitAnywhere(ctx, moved, accept)
		if err == nil {
			err = snap.AddPod(moved, dest)
		}
		if err != nil {
			snap.Revert()
			return false
		}
	}
	snap.Commit()
	return true
}
