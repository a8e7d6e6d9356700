package processor

import (
	"sort"
	"strings"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

// Holds are the nodes ProvisioningRequests hold, as the last loop left
// them: the nodes of a live, provisioned all-or-nothing request (while its
// booking lasts) and the registered nodes of an all-or-nothing attempt in
// flight, each with why ("ProvisioningRequest ns/name: ..."). The
// disruption engine keeps them from the voluntary reasons. Capacity booked
// on existing nodes for other provisioned requests (check-capacity) is
// placed anew each loop and pinned to no node: it is not listed here (the
// consolidation planner keeps the nodes its snapshot books).
//
// known is false until a loop finished with its records read: until then
// nothing tells which nodes are held, and a caller should hold every node.
func (p *Processor) Holds() (holds map[string]string, known bool) {
	p.holdsMu.Lock()
	defer p.holdsMu.Unlock()
	return p.holds, p.holdsKnown
}

// Holding reports whether node is held for a ProvisioningRequest, and why
// (see Holds).
func (p *Processor) Holding(node string) (bool, string) {
	holds, known := p.Holds()
	if !known {
		return true, "the ProvisioningRequests' bookings are not known yet (no loop has read them)"
	}
	why, ok := holds[node]
	return ok, why
}

// publishHolds sets Holds from the loop's requests at its end; a loop whose
// records could not be read, or whose requests could not be listed, leaves
// them unknown.
func (l *Loop) publishHolds() {
	holds := map[string]string{}
	for _, r := range l.requests {
		name := "ProvisioningRequest " + r.pr.Namespace + "/" + r.pr.Name
		if r.provisioned() && r.class == provreq.ClassBestEffortAtomicScaleUp {
			for n := range r.state.nodes {
				holds[n] = name + ": a node of the all-or-nothing request, provisioned and booked"
			}
		}
		for _, n := range r.attemptNodes {
			holds[n] = name + ": a node of its all-or-nothing scale-up in flight"
		}
	}
	l.p.holdsMu.Lock()
	defer l.p.holdsMu.Unlock()
	l.p.holds, l.p.holdsKnown = holds, !l.unrestored && !l.blind
}

// nodesOfAttempt are the registered nodes of the instances an attempt in
// flight claimed or adopted, sorted.
func nodesOfAttempt(at *attempt, instances Instances) []string {
	var out []string
	for g, sh := range at.groups {
		view, ok := instances.NodeGroup(g)
		if !ok {
			continue
		}
		mine := map[string]bool{}
		for _, id := range sh.listed() {
			mine[id] = true
		}
		for _, in := range view.Instances {
			if mine[in.Id] && in.Node != nil {
				out = append(out, in.Node.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// HoldsString renders holds for logs, sorted by node.
func HoldsString(holds map[string]string) string {
	lines := make([]string, 0, len(holds))
	for n, why := range holds {
		lines = append(lines, n+" ("+why+")")
	}
	sort.Strings(lines)
	return strings.Join(lines, ", ")
}
