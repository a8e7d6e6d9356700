package scaleup

import (
	"context"
	"fmt"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
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

// DeviceUsage counts the DRA devices node publishes and how many of them
// allocated claims hold, in the session's snapshot.
func (s *Session) DeviceUsage(node string) (allocated, total int) {
	return s.o.sim.Snapshot().DeviceUsage(node)
}

// ResourceSlices implements scaledown.SliceSession: the slices node
// publishes in the simulation.
func (s *Session) ResourceSlices(node string) []*resourceapi.ResourceSlice {
	return s.o.sim.Snapshot().ResourceSlices(node)
}

// TryRemove simulates removing node: its pods to move must each fit another
// registered node (not an upcoming one, not one in avoid). When they all
// fit, the removal is kept in the session, so a later candidate cannot
// count on the same room, and true is returned; otherwise nothing changes.
// Each pod goes to the first node that takes it from where the session's
// previous moved pod went (wrapping around the snapshot's nodes), not from
// the first node: the simulation of many removals stays linear.
func (s *Session) TryRemove(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool {
	return s.TryRemoveWhy(ctx, node, move, avoid) == nil
}

// TryRemoveWhy is TryRemove that says why the removal cannot be simulated.
// Removing the node releases the claims of its pods (their own claims, and
// shared claims no pod left reserves), so a pod with claims moves only
// where its claims can be allocated anew; when it cannot, the error names
// the claims. Pods an earlier removal of this session moved onto node move
// again with node's own: they need room as much as node's pods do.
func (s *Session) TryRemoveWhy(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) error {
	return s.TryRemoveWalk(ctx, node, move, avoid, nil)
}

// TryRemoveWalk is TryRemoveWhy that also records in w (when not nil) every
// node whose Filter plugins ran for a moved pod, in order, and where each
// placed pod went (framework.PodCheck.FitFromWalk): with node-local
// plugins, the nodes whose content the outcome depends on, besides the pods
// moved, the nodes avoided and where the session's cursor stood.
func (s *Session) TryRemoveWalk(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool,
	w *framework.Walk) error {
	snap := s.o.sim.Snapshot()
	snap.Fork()
	if err := snap.RemoveNode(node); err != nil {
		snap.Revert()
		return fmt.Errorf("removing node %s in simulation: %w", node, err)
	}
	accept := func(n string) bool { return !strings.HasPrefix(n, upcomingPrefix) && !avoid[n] }
	carried := s.moved[node]
	placed := make(map[string][]*apiv1.Pod)
	for i, p := range append(append([]*apiv1.Pod(nil), move...), carried...) {
		// A shallow copy: the simulation never changes a pod (the
		// snapshot's and the plugins' rule), so the copy shares p's maps
		// and slices, and the snapshot reuses what it knows of p.
		cp := *p
		cp.Spec.NodeName = ""
		moved := &cp
		// From where the previous pod went: the nodes earlier removals
		// filled are not asked again for every pod.
		// Pods of one workload share one PreFilter result (CheckMemo).
		dest, err := s.prepare(ctx, moved).FitFromWalk(ctx, accept, &s.moveNext, w)
		if err == nil {
			moved.Spec.NodeName = dest // bound there: the snapshot need not copy it again
			err = snap.AddPodLike(moved, p, dest)
		}
		if err != nil {
			snap.Revert()
			if i >= len(move) {
				return fmt.Errorf("pod %s/%s, moved onto node %s by an earlier candidate's simulation, fits no other node: %w",
					p.Namespace, p.Name, node, err)
			}
			return cannotMove(p, err)
		}
		// The session remembers the original pod, not the copy: a later
		// removal of dest moves it again, and the snapshot knows the
		// original's requests (AddPodLike), not the copy's.
		placed[dest] = append(placed[dest], p)
	}
	snap.Commit()
	if s.moved == nil {
		s.moved = make(map[string][]*apiv1.Pod)
	}
	delete(s.moved, node)
	for dest, pods := range placed {
		s.moved[dest] = append(s.moved[dest], pods...)
	}
	return nil
}

// ReplayRemoval puts the session where TryRemoveWhy(node, move) left it
// when that simulation placed its pods (move, then those earlier removals
// moved onto node) on dests, in order, without asking the plugins. With ok,
// every pod went there and the removal was committed; without, the pods
// were placed up to a refusal and the removal reverted, and only the
// cursor moved. The caller vouches that the same simulation from the same
// session went so (scale-down's kept outcomes); an error leaves the
// session unchanged.
func (s *Session) ReplayRemoval(ctx context.Context, node string, move []*apiv1.Pod, dests []string, ok bool) error {
	snap := s.o.sim.Snapshot()
	if !ok {
		if len(dests) == 0 {
			return nil
		}
		// The cursor counted in the list without node (removed in the
		// simulation's level).
		at, found := snap.Position(dests[len(dests)-1])
		self, held := snap.Position(node)
		if !found || !held {
			return fmt.Errorf("replaying the removal of %s: node %s or %s not in the snapshot", node, node, dests[len(dests)-1])
		}
		if self < at {
			at--
		}
		s.moveNext = at
		return nil
	}
	carried := s.moved[node]
	if len(dests) != len(move)+len(carried) {
		return fmt.Errorf("replaying the removal of %s: %d destinations for %d pods", node, len(dests), len(move)+len(carried))
	}
	snap.Fork()
	if err := snap.RemoveNode(node); err != nil {
		snap.Revert()
		return fmt.Errorf("replaying the removal of %s: %w", node, err)
	}
	placed := make(map[string][]*apiv1.Pod)
	for i, p := range append(append([]*apiv1.Pod(nil), move...), carried...) {
		cp := *p
		cp.Spec.NodeName = dests[i]
		if err := snap.AddPodLike(&cp, p, dests[i]); err != nil {
			snap.Revert()
			return fmt.Errorf("replaying the removal of %s: %w", node, err)
		}
		placed[dests[i]] = append(placed[dests[i]], p) // the original, as TryRemoveWalk
	}
	at, found := 0, true
	if len(dests) > 0 {
		at, found = snap.Position(dests[len(dests)-1])
	}
	if !found {
		snap.Revert()
		return fmt.Errorf("replaying the removal of %s: node %s not in the snapshot", node, dests[len(dests)-1])
	}
	snap.Commit()
	if len(dests) > 0 {
		s.moveNext = at
	}
	if s.moved == nil {
		s.moved = make(map[string][]*apiv1.Pod)
	}
	delete(s.moved, node)
	for dest, pods := range placed {
		s.moved[dest] = append(s.moved[dest], pods...)
	}
	return nil
}

// prepare runs PreFilter for a pod a removal simulation moves, or lends it
// the result of a pod of its workload moved earlier in the session
// (framework.CheckMemo); with freshChecks (tests), it always runs PreFilter.
func (s *Session) prepare(ctx context.Context, pod *apiv1.Pod) *framework.PodCheck {
	if s.freshChecks {
		return s.o.sim.Prepare(ctx, pod)
	}
	if s.checkMemo == nil {
		s.checkMemo = s.o.sim.NewCheckMemo()
	}
	return s.checkMemo.Prepare(ctx, pod)
}

// cannotMove says that pod p fits no other node, naming its resource claims
// when it has any: they hold the devices that keep the node.
func cannotMove(p *apiv1.Pod, err error) error {
	var claims []string
	for _, pc := range p.Spec.ResourceClaims {
		name := claimName(p, pc)
		if name == "" {
			name = "(claim " + pc.Name + " not created yet)"
		}
		claims = append(claims, p.Namespace+"/"+name)
	}
	if len(claims) == 0 {
		return fmt.Errorf("pod %s/%s fits no other node: %w", p.Namespace, p.Name, err)
	}
	return fmt.Errorf("pod %s/%s with resource claim(s) %s fits no other node (its claims must be allocated anew there): %w",
		p.Namespace, p.Name, strings.Join(claims, ","), err)
}

// claimName is the ResourceClaim pod claim pc refers to, "" when its
// claim has not been created yet.
func claimName(p *apiv1.Pod, pc apiv1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.Name == pc.Name && st.ResourceClaimName != nil {
			return *st.ResourceClaimName
		}
	}
	return ""
}
