package scaledown

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// simulate runs the removal simulation over the eligible candidates and
// returns the unneeded ones and the names of those it left out. Empty nodes
// come first (cheap, never limited), then the nodes unneeded in the previous
// loop (all of them: each must be found unneeded again in the loop that may
// remove it), then the others in rotation: the loop draws them in name
// order starting after the last one the previous loop drew, wrapping
// around, and stops after a pool of max(ceil(nodes x
// --scale-down-candidates-pool-ratio), --scale-down-candidates-pool-min-count)
// nodes or once --scale-down-non-empty-candidates-count of them were found
// unneeded; a non-positive count lifts both limits. When the limits leave
// some of the others out, those whose own facts (Node object, pods, the
// PDBs covering them: facts.go) changed since their last simulation, never
// simulated, or last simulated staleAfter ago come first, each part in that
// rotation order. A node left out this loop is drawn in a later one, so
// with every node removable all of them are unneeded within
// ceil(others / min(pool, count)) loops. A node the simulation found
// unremovable is not simulated again for --unremovable-node-recheck-timeout
// (reason RecentlyUnremovable) unless its own facts changed meanwhile (its
// blocking pod left, a PDB changed): then it is simulated in this loop.
// Once --scale-down-simulation-timeout has passed the rest are left out.
// Nodes left out are neither unneeded nor unremovable in this plan (one
// unneeded before keeps its timer: see timers).
func (p *Planner) simulate(ctx context.Context, plan *Plan, eligible []*Candidate, podsOf map[*Candidate][]*apiv1.Pod,
	in Input, pdbs *drain.PDBs, removed map[string]bool, total int) (unneeded []*Candidate, skipped []string) {
	logger := klog.FromContext(ctx)
	var empty, previous, others []*Candidate
	for _, c := range eligible {
		_, known := p.since[c.Node.Name]
		switch {
		case !hasPodsToMove(podsOf[c]):
			empty = append(empty, c)
		case known:
			previous = append(previous, c)
		default:
			others = append(others, c)
		}
	}
	p.facts.observe(eligible, podsOf, in, pdbs.List())
	others = rotate(others, p.cursor)
	limit, pool := p.candidateLimits(total)
	if len(others) > min(limit, pool) {
		// Not every one will be drawn: the pool goes to the changed ones
		// first. Otherwise the order stays the rotation's, the same from
		// one quiet loop to the next (what verdicts.go keeps outcomes by).
		others = p.facts.changedFirst(others, in.Now, p.staleAfter())
	}
	deadline := p.clock.Now().Add(p.opts.ScaleDownSimulationTimeout)
	found, drawn, timedOut := 0, 0, false
	for i, c := range append(append(empty, previous...), others...) {
		name := c.Node.Name
		if !timedOut && !p.clock.Now().Before(deadline) {
			timedOut = true
			logger.Info("Scale-down simulation out of time; the other nodes wait for a later loop",
				"simulationTimeout", p.opts.ScaleDownSimulationTimeout, "skipped", len(eligible)-i)
		}
		isOther := i >= len(empty)+len(previous)
		if timedOut || (isOther && (found >= limit || drawn >= pool)) {
			skipped = append(skipped, name)
			continue
		}
		if isOther {
			// The next loop starts after this node, whatever comes of it.
			p.cursor = name
		}
		if r, ok := p.recheck[name]; ok {
			why := p.facts.changedSince(name)
			if why == "" {
				plan.Unremovable[name] = ReasonRecentlyUnremovable
				if r.detail != "" {
					p.blockers[name] = r.detail
				}
				logger.V(4).Info("Node found unremovable recently; not simulated again yet", "node", name,
					"reason", r.reason, "recheckAt", r.until)
				continue
			}
			delete(p.recheck, name)
			logger.V(4).Info("Node found unremovable recently, but its own facts changed since: simulated again",
				"node", name, "reason", r.reason, "changed", why)
		}
		if isOther {
			drawn++
		}
		reason := p.tryRemove(ctx, c, podsOf[c], in, pdbs, removed)
		p.facts.simulated(name, in.Now)
		if reason != "" {
			plan.Unremovable[name] = reason
			if p.opts.UnremovableNodeRecheckTimeout > 0 {
				p.recheck[name] = recheckEntry{until: in.Now.Add(p.opts.UnremovableNodeRecheckTimeout), reason: reason,
					detail: p.blockers[name]}
			}
			continue
		}
		removed[name] = true
		unneeded = append(unneeded, c)
		if isOther {
			found++
		}
	}
	if len(skipped) > 0 {
		logger.V(2).Info("Nodes left out of this loop's scale-down simulation", "count", len(skipped),
			"nonEmptyCandidatesCount", p.opts.ScaleDownNonEmptyCandidatesCount, "pool", pool,
			"newCandidates", found, "nextLoopStartsAfter", p.cursor)
	}
	logger.V(4).Info("Scale-down simulation done", "unneeded", len(unneeded), "empty", len(empty),
		"previous", len(previous), "newCandidates", found, "drawn", drawn, "leftOut", len(skipped))
	return unneeded, skipped
}

// defaultStaleAfter bounds how long a node's last simulation keeps it
// behind the changed nodes in the rotation when
// --unremovable-node-recheck-timeout is 0: the flag's default.
const defaultStaleAfter = 5 * time.Minute

// staleAfter is the age from which a node's last simulation no longer
// keeps it behind the changed nodes in the rotation: the recheck timeout
// (by then a node found unremovable is due anyway), or defaultStaleAfter
// when that is off. Under a churn that changes pool-many nodes every loop,
// an unchanged node is thus drawn within staleAfter plus
// ceil(nodes / min(pool, count)) loops.
func (p *Planner) staleAfter() time.Duration {
	if t := p.opts.UnremovableNodeRecheckTimeout; t > 0 {
		return t
	}
	return defaultStaleAfter
}

// rotate returns the candidates (in name order) starting with the first
// whose name sorts after cursor, the ones before it moved to the end.
func rotate(cs []*Candidate, cursor string) []*Candidate {
	i := sort.Search(len(cs), func(i int) bool { return cs[i].Node.Name > cursor })
	return append(append(make([]*Candidate, 0, len(cs)), cs[i:]...), cs[:i]...)
}

// candidateLimits returns how many non-empty nodes that were not unneeded
// in the previous loop may be found unneeded, and how many of them may be
// simulated, in one loop of a cluster of total nodes.
func (p *Planner) candidateLimits(total int) (limit, pool int) {
	if p.opts.ScaleDownNonEmptyCandidatesCount <= 0 {
		return math.MaxInt, math.MaxInt
	}
	pool = int(math.Ceil(float64(total) * p.opts.ScaleDownCandidatesPoolRatio))
	return p.opts.ScaleDownNonEmptyCandidatesCount, max(pool, p.opts.ScaleDownCandidatesPoolMinCount)
}

// forgetRechecks drops the recheck entries whose time has come or whose
// node is gone.
func (p *Planner) forgetRechecks(nodes []*apiv1.Node, now time.Time) {
	present := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		present[n.Name] = true
	}
	for name, r := range p.recheck {
		if !present[name] || !now.Before(r.until) {
			delete(p.recheck, name)
		}
	}
}

// hasPodsToMove reports whether any pod on the node would have to be
// evicted: not a DaemonSet or mirror pod, not finished.
func hasPodsToMove(pods []*apiv1.Pod) bool {
	for _, p := range pods {
		if p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed ||
			drain.IsDaemonSetPod(p) || drain.IsMirrorPod(p) {
			continue
		}
		return true
	}
	return false
}

// skipTracker follows the nodes the simulation leaves out, loop after loop
// (--max-node-skip-eval-time-tracker-enabled): a node left out is taken as
// last evaluated at the loop before the one that first left it out.
type skipTracker struct {
	mu       sync.Mutex
	lastLoop time.Time
	since    map[string]time.Time
	longest  time.Duration
}

func (t *skipTracker) update(skipped []string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	since := make(map[string]time.Time, len(skipped))
	longest := time.Duration(0)
	for _, name := range skipped {
		s, ok := t.since[name]
		if !ok {
			s = t.lastLoop
			if s.IsZero() {
				s = now
			}
		}
		since[name] = s
		longest = max(longest, now.Sub(s))
	}
	t.since, t.lastLoop, t.longest = since, now, longest
}

// MaxNodeSkipEval returns the longest time a node now left out of the
// scale-down simulation has gone without being evaluated, and whether
// --max-node-skip-eval-time-tracker-enabled is set. The metric
// max_node_skip_eval_duration_seconds reports it.
func (p *Planner) MaxNodeSkipEval() (time.Duration, bool) {
	if p.skipped == nil {
		return 0, false
	}
	p.skipped.mu.Lock()
	defer p.skipped.mu.Unlock()
	return p.skipped.longest, true
}
