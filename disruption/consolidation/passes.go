package consolidation

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// settleDraining removes the nodes being deleted from the simulation and
// places the pods their drains evict where they fit (the nodes that stay
// first), so that no candidate counts on the room they will take. A pod
// that fits nowhere is left out: it will wait for new capacity whatever
// this plan proposes. It returns the nodes some of whose pods fit nowhere.
func (p *Planner) settleDraining(ctx context.Context, w *work) (unsettled []string) {
	logger := klog.FromContext(ctx)
	for _, ns := range w.draining {
		if err := w.sim.snap.RemoveNode(ns.node.Name); err != nil {
			continue
		}
		lost := 0
		for _, pod := range ns.move {
			dest, err := w.sim.place(ctx, pod, "")
			if err != nil {
				lost++
				continue
			}
			w.sim.moved[dest] = slices.Concat(w.sim.moved[dest], []*apiv1.Pod{pod})
		}
		if lost > 0 {
			logger.V(2).Info("Consolidation: pods of a node being deleted fit no other node", "node", ns.node.Name, "pods", lost)
			unsettled = append(unsettled, ns.node.Name)
		}
	}
	w.sim.next = 0
	w.sim.measureRoom()
	return unsettled
}

// deleteOnly removes, in the simulation, every candidate whose pods fit on
// the nodes that stay, best value first; it returns those and the rest.
func (p *Planner) deleteOnly(ctx context.Context, w *work) (deleted, rest []*nodeState) {
	logger := klog.FromContext(ctx)
	for _, ns := range w.order {
		switch {
		case !ns.group.canRemove():
			w.reason(ns, ReasonMinSize)
		case !w.budgetLeft():
			w.reason(ns, ReasonOutOfBudget)
		case w.sim.tryRemove(ctx, ns, ""):
			ns.group.removed++
			deleted = append(deleted, ns)
			logger.V(4).Info("Consolidation: node's pods fit on the nodes that stay", "node", ns.node.Name,
				"pods", len(ns.move), "waitingForPDB", ns.waiting)
			continue
		}
		rest = append(rest, ns)
	}
	return deleted, rest
}

// reason records why ns is no candidate, unless a later pass makes it one.
func (w *work) reason(ns *nodeState, why string) {
	w.reasons[ns.node.Name] = why
}

// deleteCandidates turns the delete-only removals into candidates of up to
// Options.DeleteSetSize nodes, in the order found.
func (p *Planner) deleteCandidates(w *work, deleted []*nodeState) []disruption.Candidate {
	var out []disruption.Candidate
	for start := 0; start < len(deleted); start += p.opts.DeleteSetSize {
		set := deleted[start:min(start+p.opts.DeleteSetSize, len(deleted))]
		c := disruption.Candidate{Reason: disruption.Consolidatable}
		priced := true
		for _, ns := range set {
			c.Nodes = append(c.Nodes, ns.node.Name)
			c.SavingPerHour += ns.price // 0 when unknown
			priced = priced && ns.priced
		}
		saving := ""
		if priced {
			saving = fmt.Sprintf(": saves %.4g/h", c.SavingPerHour)
		}
		c.Message = fmt.Sprintf("the pods of %s (%d to move) fit on the nodes that stay%s%s",
			describeNodes(set), movedPods(set), saving, waitingText(set))
		out = append(out, c)
	}
	return out
}

// fill is one replacement trial: the nodes whose pods went onto the rest
// plus one new node of group.
type fill struct {
	group   *groupState
	nodes   []*nodeState
	removed float64 // their price per hour
	saving  float64
}

// replacements proposes up to Options.MaxReplacements candidates, each k
// nodes of rest replaced by one new node of the group saving most, above
// the threshold; rest loses the nodes replaced.
func (p *Planner) replacements(ctx context.Context, w *work, rest *[]*nodeState) []disruption.Candidate {
	logger := klog.FromContext(ctx)
	var out []disruption.Candidate
	shrinking := w.shrinking()
	for round := 0; round < p.opts.MaxReplacements && len(*rest) > 0; round++ {
		var best *fill
		for _, g := range w.groups {
			if !g.canAdd() || !g.priced || !w.budgetLeft() {
				continue
			}
			if shrinking[g] || g.removed > 0 {
				// Nodes of g are being removed, their pods fitting
				// elsewhere: a new node of g now would be the next
				// one emptied, its pods moved a second time.
				logger.V(4).Info("Consolidation: no replacement by a group that is losing nodes", "nodeGroup", g.ID)
				continue
			}
			f := p.fill(ctx, w, g, *rest, round, nil)
			if f == nil || f.saving <= 0 || f.saving < p.opts.MinSavingPerHour || f.saving < p.opts.MinSavingRatio*f.removed {
				continue
			}
			if best == nil || f.saving > best.saving {
				best = f
			}
		}
		if best == nil {
			break
		}
		// Done again for good: the same steps from the same state.
		f := p.fill(ctx, w, best.group, *rest, round, best.nodes)
		if f == nil || len(f.nodes) != len(best.nodes) {
			logger.Info("Consolidation: a replacement could not be simulated again; none proposed", "nodeGroup", best.group.ID)
			break
		}
		best.group.added++
		gone := map[*nodeState]bool{}
		for _, ns := range f.nodes {
			ns.group.removed++
			gone[ns] = true
			delete(w.reasons, ns.node.Name)
		}
		kept := (*rest)[:0]
		for _, ns := range *rest {
			if !gone[ns] {
				kept = append(kept, ns)
			}
		}
		*rest = kept
		c := disruption.Candidate{Reason: disruption.Consolidatable, Replacement: []disruption.Replacement{{Group: f.group.ID, Count: 1}},
			SavingPerHour: f.saving}
		for _, ns := range f.nodes {
			c.Nodes = append(c.Nodes, ns.node.Name)
		}
		c.Message = fmt.Sprintf("%s (%.4g/h) replaced by one node of group %s (%.4g/h), %d pods to move: saves %.4g/h%s",
			describeNodes(f.nodes), f.removed, f.group.ID, f.group.price, movedPods(f.nodes), f.saving, waitingText(f.nodes))
		logger.V(4).Info("Consolidation: replacement", "nodes", c.Nodes, "nodeGroup", f.group.ID, "savingPerHour", f.saving)
		out = append(out, c)
	}
	return out
}

// shrinking names the groups with nodes being deleted (the engine's or
// scale-down's removals under way).
func (w *work) shrinking() map[*groupState]bool {
	out := map[*groupState]bool{}
	for _, ns := range w.draining {
		if g := w.groupOf[ns.node.Name]; g != nil {
			out[g] = true
		}
	}
	return out
}

// fill adds one new node of g and removes the nodes of rest whose pods fit
// on the nodes that stay plus that one, in order, at most
// Options.MaxNodesPerReplacement; only, when, those of only (a replay). It
// keeps the result in the simulation when only is set, and reverts it
// otherwise. It returns nil when the new node is not used.
func (p *Planner) fill(ctx context.Context, w *work, g *groupState, rest []*nodeState, round int, only []*nodeState) *fill {
	s := w.sim
	saved := s.simState.clone()
	s.snap.Fork()
	keep := false
	defer func() {
		if keep {
			s.snap.Commit()
			return
		}
		s.snap.Revert()
		s.simState = saved
	}()
	extra, err := s.addTemplate(g.ID, g.Template, round)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Consolidation: no replacement trial", "nodeGroup", g.ID, "err", err)
		return nil
	}
	s.open(extra)
	f := &fill{group: g}
	removed := map[*groupState]int{}
	candidates := only
	if only == nil {
		candidates = w.byDensity(g, rest)
	}
	for _, ns := range candidates {
		if len(f.nodes) >= p.opts.MaxNodesPerReplacement {
			break
		}
		if !ns.priced || ns.group.Size-ns.group.removed-removed[ns.group] <= ns.group.Min {
			continue
		}
		if left, limited := w.in.BudgetLeft[ns.group.ID]; limited && removed[ns.group] >= left {
			continue // the engine would hold the whole set back
		}
		if only == nil && !w.budgetLeft() {
			break
		}
		if s.tryRemove(ctx, ns, extra) {
			removed[ns.group]++
			f.nodes = append(f.nodes, ns)
			f.removed += ns.price
		}
	}
	if len(s.moved[extra]) == 0 {
		return nil
	}
	f.saving = f.removed - g.price
	if only != nil {
		s.close(extra)
		keep = true
	}
	return f
}

// byDensity orders rest for a fill of a new node of g: the most price
// per share of that node their pods (and those moved onto them) would take
// first, as a knapsack's greedy does; ties keep rest's order.
func (w *work) byDensity(g *groupState, rest []*nodeState) []*nodeState {
	alloc := g.Template.Node.Status.Allocatable
	cpu, mem := float64(alloc.Cpu().MilliValue()), float64(alloc.Memory().Value())
	density := make(map[*nodeState]float64, len(rest))
	for _, ns := range rest {
		var r framework.Request
		for _, p := range slices.Concat(ns.move, w.sim.moved[ns.node.Name]) {
			pr := w.sim.request(p)
			r.MilliCPU += pr.MilliCPU
			r.Memory += pr.Memory
		}
		share := 1e-6
		if cpu > 0 {
			share = max(share, float64(r.MilliCPU)/cpu)
		}
		if mem > 0 {
			share = max(share, float64(r.Memory)/mem)
		}
		density[ns] = ns.price / share
	}
	out := slices.Clone(rest)
	sort.SliceStable(out, func(i, j int) bool { return density[out[i]] > density[out[j]] })
	return out
}

func describeNodes(set []*nodeState) string {
	names := make([]string, len(set))
	for i, ns := range set {
		names[i] = ns.node.Name
	}
	if len(names) == 1 {
		return "node " + names[0]
	}
	return "nodes " + strings.Join(names, ", ")
}

func movedPods(set []*nodeState) int {
	n := 0
	for _, ns := range set {
		n += len(ns.move)
	}
	return n
}

func waitingText(set []*nodeState) string {
	n := 0
	for _, ns := range set {
		n += ns.waiting
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d pods wait for a PodDisruptionBudget that allows no disruption now)", n)
}
