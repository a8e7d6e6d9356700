package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// EndingNode is a node whose group's reserved capacity ends soon: the
// group and the reservation's end.
type EndingNode struct {
	Group string
	cloudprovider.ReservationEnd
}

// ReservationEnd proposes, for the disruption.ReservationEnding reason, the
// nodes of the groups whose reserved capacity ends at a fixed time (the
// groups implementing cloudprovider.ReservationEnder, such as those of an
// EC2 Capacity Block), from DrainBefore ahead of the end on. Nothing
// replaces them in their group (its capacity ends): the engine drains and
// deletes them, and their pods, pending again, make the scale-up give
// them nodes of other groups. Only a node its provider places in such a
// group (by the group's own listing of its instances) is proposed. The
// reason is not voluntary: protections and the default budget do not hold
// it back (the node goes at the end whatever is decided), PDBs are honoured
// by the drain as for any reason.
type ReservationEnd struct {
	groups GroupLookup
	before time.Duration

	mu     sync.Mutex
	ending map[string]EndingNode
}

var _ disruption.Source = (*ReservationEnd)(nil)

// NewReservationEnd returns the source: nodes are proposed from before
// ahead of their reservation's end on (0: from the end on).
func NewReservationEnd(groups GroupLookup, before time.Duration) *ReservationEnd {
	return &ReservationEnd{groups: groups, before: max(before, 0)}
}

// Reason implements disruption.Source.
func (s *ReservationEnd) Reason() disruption.Reason { return disruption.ReservationEnding }

// Propose implements disruption.Source: the eligible nodes (Ready, not
// being deleted) of every group whose reservation ends within the drain
// window at loop.Now, the earliest end first. Every node of such a group,
// eligible or not, is kept for Ending.
func (s *ReservationEnd) Propose(ctx context.Context, loop *processors.Loop) []disruption.Candidate {
	logger := klog.FromContext(ctx)
	ending := map[string]EndingNode{}
	ends := map[string]*EndingNode{} // group id -> its end, nil: none or not yet
	var out []proposal
	for _, n := range loop.Nodes {
		if n.DeletionTimestamp != nil {
			continue
		}
		g, err := s.groups.NodeGroupForNode(ctx, n)
		if err != nil || g == nil || !g.Exist() {
			continue
		}
		id := g.Id()
		e, seen := ends[id]
		if !seen {
			if r, ok := g.(cloudprovider.ReservationEnder); ok {
				if end, ok := r.ReservationEnd(); ok && !end.End.IsZero() && !loop.Now.Before(end.End.Add(-s.before)) {
					e = &EndingNode{Group: id, ReservationEnd: end}
				}
			}
			ends[id] = e
		}
		if e == nil {
			continue
		}
		ending[n.Name] = *e
		if hasTaint(n, toBeDeletedTaint) || !ready(n) {
			continue
		}
		logger.V(4).Info("Node's reserved capacity ends", "node", klog.KObj(n), "nodeGroup", id, "reservation", e.ID, "end", e.End)
		out = append(out, proposal{created: e.End, candidate: disruption.Candidate{
			Reason: disruption.ReservationEnding,
			Nodes:  []string{n.Name},
			Message: fmt.Sprintf("the reserved capacity %s of node group %s ends at %s; its nodes are drained from %s before, without replacement in the group",
				e.ID, id, e.End.UTC().Format(time.RFC3339), s.before),
		}})
	}
	// A node of the window seen before and gone since (the drain of the
	// loop that first saw it may delete it in that same loop, before the
	// ProvisioningRequests are processed) stays until its reservation's
	// end, so that a request on it is still told why it lost it.
	present := make(map[string]bool, len(loop.Nodes))
	for _, n := range loop.Nodes {
		present[n.Name] = true
	}
	s.mu.Lock()
	for name, e := range s.ending {
		if !present[name] && loop.Now.Before(e.End) {
			ending[name] = e
		}
	}
	s.ending = ending
	s.mu.Unlock()
	return oldestFirst(out)
}

// Ending returns the nodes of the groups whose reservation was inside its
// drain window at the last Propose, by node name (those not proposed, not
// Ready ones for instance, included), and those seen so before and gone
// since, until their reservation's end. Safe from any goroutine; the map is
// not to be changed.
func (s *ReservationEnd) Ending() map[string]EndingNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ending
}
