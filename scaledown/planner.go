package scaledown

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
	"k8s.io/autoscaler/cluster-autoscaler/taints"
)

// Unremovable reasons, upstream's names (and BookedCapacity, ours), as
// unremovable_nodes_count's reason label.
const (
	ReasonNoReason                    = "NoReason"
	ReasonScaleDownDisabledAnnotation = "ScaleDownDisabledAnnotation"
	ReasonScaleDownUnreadyDisabled    = "ScaleDownUnreadyDisabled"
	ReasonNotAutoscaled               = "NotAutoscaled"
	ReasonNotUnneededLongEnough       = "NotUnneededLongEnough"
	ReasonNotUnreadyLongEnough        = "NotUnreadyLongEnough"
	ReasonNodeGroupMinSizeReached     = "NodeGroupMinSizeReached"
	ReasonAtomicScaleDownFailed       = "AtomicScaleDownFailed"
	ReasonMinimalResourceLimit        = "MinimalResourceLimitExceeded"
	ReasonCurrentlyBeingDeleted       = "CurrentlyBeingDeleted"
	ReasonNotUnderutilized            = "NotUnderutilized"
	ReasonNoPlaceToMovePods           = "NoPlaceToMovePods"
	ReasonBlockedByPod                = "BlockedByPod"
	ReasonBookedCapacity              = "BookedCapacity"
	ReasonNotStarted                  = "NotStarted"
	// ReasonUnexpectedError: what the decision needs could not be read
	// (a fork's scale-down minimums).
	ReasonUnexpectedError = "UnexpectedError"
	// ReasonNodeGroupScaleDownBlocked: the node's group says none of its
	// nodes may go now (cloudprovider.ScaleDownBlocker, e.g. a Cluster API
	// MachineDeployment rolling out); Plan.Details says why. Upstream drops
	// such nodes from the scale-down candidates without a reason.
	ReasonNodeGroupScaleDownBlocked = "NodeGroupScaleDownBlocked"
	// ReasonRecentlyUnremovable: the simulation found the node unremovable
	// less than --unremovable-node-recheck-timeout ago; it is not simulated
	// again until then, unless its Node object, its pods or the PDBs
	// covering them change meanwhile (facts.go).
	ReasonRecentlyUnremovable = "RecentlyUnremovable"
)

// Annotations and taints of scale-down, upstream's keys.
const (
	ScaleDownDisabledAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	DeletionCandidateTaint      = taints.DeletionCandidate
	ToBeDeletedTaint            = clusterstate.ToBeDeletedTaint
)

// Session is the loop's simulation, after scale-up placed pending pods and
// bookings; *scaleup.Session implements it.
type Session interface {
	PodsOn(node string) []*apiv1.Pod
	TryRemove(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) bool
}

// Candidate is a node that could go, and what its removal means.
type Candidate struct {
	Node        *apiv1.Node
	Group       cloudprovider.NodeGroup
	Utilization float64
	Unready     bool
	// Move are the pods to evict, DaemonSet the DaemonSet pods on it.
	Move, DaemonSet []*apiv1.Pod
	Since           time.Time
	// Threshold is the utilisation threshold Utilization was held against.
	Threshold float64
	// Atomic is set on the nodes of a zeroOrMaxNodeScaling group: they go
	// together, in one deletion, or not at all.
	Atomic bool
}

// Empty reports whether no pod has to move.
func (c *Candidate) Empty() bool { return len(c.Move) == 0 }

// Plan is one loop's scale-down view.
type Plan struct {
	// Unneeded are the nodes that could go now, with their timers.
	Unneeded []*Candidate
	// Removable are those whose unneeded (or unready) time has passed and
	// whose group can lose them, in the order to remove them.
	Removable []*Candidate
	// Unremovable gives the reason of every other autoscaled node.
	Unremovable map[string]string
	// Details says more of some of those reasons: for NoPlaceToMovePods
	// (and RecentlyUnremovable after it), which pod could not move and
	// why, naming its resource claims when they cannot be allocated on
	// another node.
	Details map[string]string
	// Utilization holds the utilisation and threshold of the nodes whose
	// utilisation was computed (the candidates and NotUnderutilized ones),
	// for the explainer.
	Utilization map[string][2]float64
}

// Planner finds unneeded nodes and keeps their timers, in memory and on the
// nodes.
type Planner struct {
	opts     Options
	provider cloudprovider.CloudProvider
	rules    *drain.Rules
	taints   *Taints
	// readiness tells starting nodes from unready ones (startup and status taints).
	readiness clusterstate.Taints
	// since holds when each currently unneeded node became so. It is the
	// timer of nodes without a candidate taint (beyond the per-loop taint
	// budget, or all of them with --max-bulk-soft-taint-count=0).
	since map[string]time.Time
	// report receives step durations and skipped removals (set by New).
	report Reporter
	// recheck holds, for the nodes the simulation found unremovable, until
	// when they are not simulated again and the reason found
	// (--unremovable-node-recheck-timeout); an entry goes early when the
	// node's own facts change (facts.go).
	recheck map[string]recheckEntry
	// clock times the simulation (--scale-down-simulation-timeout).
	clock clock.PassiveClock
	// skipped tracks the nodes left out of the simulation (time budget,
	// candidate limits) when --max-node-skip-eval-time-tracker-enabled is
	// set; nil otherwise.
	skipped *skipTracker
	// requests remembers each pod's requests from one loop to the next
	// (utilisation is computed for every node in every loop).
	requests framework.PodMemo[framework.Request]
	// verdicts keeps the outcomes of the last loop's removal simulations
	// (verdicts.go).
	verdicts verdicts
	// facts tells, per eligible node, whether its Node object, pods or
	// covering PDBs changed since its last simulation (facts.go): a
	// changed node leaves the recheck window and is drawn first.
	facts facts
	// usage keeps each node's requested resources for as long as its Node
	// object and pods do not change (usage.go).
	usage usageMemo
	// cursor is the name of the last node the simulation drew as a new
	// drain candidate; the next loop goes on after it (candidates.go).
	cursor string
	// blockers holds what the last simulation of each node kept for
	// NoPlaceToMovePods said (ExplainingSession), for Plan.Details.
	blockers map[string]string
	// minimums adds a fork's minimums to the flags' (WithMinimums).
	minimums MinimumSource
}

type recheckEntry struct {
	until  time.Time
	reason string
	// detail is what the simulation said of the reason (the pod that
	// cannot move, its claims): the node's explanation while it waits,
	// even when a loop in between found it not eligible and forgot it.
	detail string
}

// PlannerOption configures a Planner.
type PlannerOption func(*Planner)

// WithPlannerClock replaces the real clock that times the simulation.
func WithPlannerClock(c clock.PassiveClock) PlannerOption { return func(p *Planner) { p.clock = c } }

// NewPlanner builds a planner.
func NewPlanner(opts Options, provider cloudprovider.CloudProvider, rules *drain.Rules, taints *Taints,
	options ...PlannerOption) *Planner {
	p := &Planner{opts: opts, provider: provider, rules: rules, taints: taints, readiness: clusterstate.NewTaints(opts.Taints),
		since: map[string]time.Time{}, recheck: map[string]recheckEntry{}, clock: clock.RealClock{},
		blockers: map[string]string{}}
	if opts.MaxNodeSkipEvalTimeTrackerEnabled {
		p.skipped = &skipTracker{since: map[string]time.Time{}}
	}
	for _, o := range options {
		o(p)
	}
	return p
}

// Input is what one plan looks at.
type Input struct {
	Now           time.Time
	Nodes         []*apiv1.Node
	ScheduledPods []*apiv1.Pod
	State         *clusterstate.Registry
	Session       Session

	// deleting names the nodes whose removal the actuator has started and
	// not finished, with their group; deleted those it deleted, which the
	// group's target size already leaves out even while the Node is still
	// listed. ScaleDown.Run fills both.
	deleting map[string]string
	deleted  map[string]bool
	// reset is the session's snapshot when the pods Update groups by node
	// are those its last Reset was given (usage.go), else nil.
	reset *framework.Snapshot
}

// Update plans at in.Now: every node is either unneeded (with the time it
// became so, read back from its DeletionCandidate taint after a restart) or
// unremovable with a reason; the taints follow.
func (p *Planner) Update(ctx context.Context, in Input) *Plan {
	logger := klog.FromContext(ctx)
	plan := &Plan{Unremovable: map[string]string{}, Utilization: map[string][2]float64{}}
	podsByNode, reset := podsByNodeOf(in)
	in.reset = reset
	groupOf := map[string]*clusterstate.GroupState{}
	for _, gs := range in.State.Groups() {
		for _, n := range gs.Nodes {
			groupOf[n.Name] = gs
		}
	}
	pdbs, err := p.rules.NewPDBs()
	if err != nil {
		logger.Error(err, "Reading PodDisruptionBudgets; no scale-down this loop")
		return plan
	}
	nodes := append([]*apiv1.Node(nil), in.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	// Nodes already counted as gone in the simulation: no candidate's pods
	// may be moved onto them. Nodes being deleted or drained are gone too.
	removed := map[string]bool{}
	for _, n := range nodes {
		if hasTaint(n, ToBeDeletedTaint) || in.deleting[n.Name] != "" || in.deleted[n.Name] {
			removed[n.Name] = true
		}
	}
	p.forgetRechecks(nodes, in.Now)
	blocked := blockedGroups(ctx, in.State.Groups())
	var eligible []*Candidate
	podsOf := map[*Candidate][]*apiv1.Pod{}
	for _, n := range nodes {
		if gs := groupOf[n.Name]; gs != nil && blocked[gs.NodeGroup.Id()] != "" {
			logger.V(4).Info("Node will be skipped: its node group blocks scale-down", "node", n.Name,
				"nodeGroup", gs.NodeGroup.Id(), "why", blocked[gs.NodeGroup.Id()])
			plan.Unremovable[n.Name] = ReasonNodeGroupScaleDownBlocked
			if plan.Details == nil {
				plan.Details = map[string]string{}
			}
			plan.Details[n.Name] = blocked[gs.NodeGroup.Id()]
			continue
		}
		c, reason := p.eligible(n, groupOf[n.Name], podsByNode[n.Name], in)
		if c != nil {
			plan.Utilization[n.Name] = [2]float64{c.Utilization, c.Threshold}
		}
		if reason != "" {
			plan.Unremovable[n.Name] = reason
			continue
		}
		eligible = append(eligible, c)
		podsOf[c] = inNameOrder(podsByNode[n.Name])
	}
	p.requests.Rotate()
	p.usage.rotate()
	p.verdicts.begin(in, removed)
	unneeded, skipped := p.simulate(ctx, plan, eligible, podsOf, in, pdbs, removed, len(nodes))
	p.verdicts.end()
	if p.skipped != nil {
		p.skipped.update(skipped, in.Now)
	}
	plan.Unneeded = unneeded
	p.explain(plan)
	p.timers(ctx, plan, in, skipped)
	return plan
}

// blockedGroups asks each group that can block scale-down
// (cloudprovider.ScaleDownBlocker) once: the ids of those that do, with why.
func blockedGroups(ctx context.Context, groups []*clusterstate.GroupState) map[string]string {
	out := map[string]string{}
	for _, gs := range groups {
		if b, ok := gs.NodeGroup.(cloudprovider.ScaleDownBlocker); ok {
			if why := b.ScaleDownBlocked(ctx); why != "" {
				out[gs.NodeGroup.Id()] = why
			}
		}
	}
	return out
}

// eligible applies the cheap checks to one node (group, annotations,
// deletion, readiness, utilisation, booked capacity); it returns the
// candidate to simulate or the reason it is not one (with the candidate
// it would have been once its utilisation is known).
func (p *Planner) eligible(n *apiv1.Node, gs *clusterstate.GroupState, pods []*apiv1.Pod, in Input) (*Candidate, string) {
	if gs == nil {
		return nil, ReasonNotAutoscaled
	}
	if n.Annotations[ScaleDownDisabledAnnotation] == "true" {
		return nil, ReasonScaleDownDisabledAnnotation
	}
	if hasTaint(n, ToBeDeletedTaint) || in.deleting[n.Name] != "" {
		return nil, ReasonCurrentlyBeingDeleted
	}
	c := &Candidate{Node: n, Group: gs.NodeGroup}
	switch gs.DevicesReadiness(n.Name, p.readiness.NodeReadiness(n, in.Now, gs.Options.MaxNodeStartupTime)) {
	case clusterstate.NotStarted:
		return nil, ReasonNotStarted
	case clusterstate.Unready:
		if !p.opts.ScaleDownUnreadyEnabled {
			return nil, ReasonScaleDownUnreadyDisabled
		}
		c.Unready = true
	}
	var accelerator bool
	c.Utilization, accelerator = p.utilization(n, pods, gs.Options, in)
	threshold := gs.Options.ScaleDownUtilizationThreshold
	if accelerator {
		threshold = gs.Options.ScaleDownGPUUtilizationThreshold
	}
	c.Threshold = threshold
	if !c.Unready && c.Utilization >= threshold {
		return c, ReasonNotUnderutilized
	}
	// Pods the loop placed on this node (bookings of ProvisioningRequests,
	// pending pods) need it.
	if simulated := in.Session.PodsOn(n.Name); len(simulated) > len(pods) {
		return c, ReasonBookedCapacity
	}
	return c, ""
}

// tryRemove runs the drain rules and the simulation for one eligible
// candidate; it reports whether its pods can go elsewhere, or the reason
// they cannot.
func (p *Planner) tryRemove(ctx context.Context, c *Candidate, pods []*apiv1.Pod, in Input, pdbs *drain.PDBs,
	removed map[string]bool) string {
	trial := pdbs.Fork()
	move, left, blocking := p.rules.Classify(pods, trial, in.Now)
	if blocking != nil {
		klog.FromContext(ctx).V(4).Info("Node cannot be removed: a pod blocks it", "node", c.Node.Name,
			"pod", klog.KObj(blocking.Pod), "reason", blocking.Reason)
		p.blockers[c.Node.Name] = blockingDetail(blocking)
		return ReasonBlockedByPod
	}
	for _, pod := range left {
		if drain.IsDaemonSetPod(pod) {
			c.DaemonSet = append(c.DaemonSet, pod)
		}
	}
	ok, why := p.verdicts.tryMove(ctx, in.Session, c.Node.Name, move, removed)
	delete(p.blockers, c.Node.Name)
	if !ok {
		if why != "" {
			p.blockers[c.Node.Name] = why
			klog.FromContext(ctx).V(2).Info("Node cannot be removed: a pod cannot move", "node", c.Node.Name, "why", why)
		}
		return ReasonNoPlaceToMovePods
	}
	*pdbs = *trial
	c.Move = move
	return ""
}

func (p *Planner) isGPUNode(n *apiv1.Node) bool {
	if _, ok := n.Labels[p.provider.GPULabel()]; ok {
		return true
	}
	return cloudprovider.GPUResourceIn(n.Status.Allocatable) != ""
}

// timers sets when each unneeded node became unneeded (the earlier of the
// planner's memory and its candidate taint), taints new ones and untaints
// nodes needed again, and picks the removable ones. A node unneeded before
// and left out of this loop's simulation (skipped) keeps its timer and its
// taint, but is not removable in this loop: it was not checked again.
func (p *Planner) timers(ctx context.Context, plan *Plan, in Input, skipped []string) {
	soft := p.taints.SoftEnabled()
	keep := map[string]bool{}
	for _, name := range skipped {
		if _, known := p.since[name]; known {
			keep[name] = true
		}
	}
	unneeded := map[string]bool{}
	var toTaint []*Candidate
	for _, c := range plan.Unneeded {
		name := c.Node.Name
		unneeded[name] = true
		since, known := p.since[name]
		if !known {
			since = in.Now
		}
		if soft {
			switch t, ok := taintTime(c.Node, DeletionCandidateTaint); {
			case !ok:
				toTaint = append(toTaint, c)
			case !known && p.staleCandidateTaint(t, in.Now):
				// Left by a run that stopped long ago: its time is not
				// trusted, and the taint gets the fresh one.
				klog.FromContext(ctx).V(2).Info("Deletion-candidate taint older than --node-deletion-candidate-ttl; its timer restarts",
					"node", name, "taintTime", t, "ttl", p.opts.NodeDeletionCandidateTTL)
				toTaint = append(toTaint, c)
			case t.Before(since):
				since = t
			}
		}
		p.since[name] = since
		c.Since = since
	}
	for name := range p.since {
		if !unneeded[name] && !keep[name] {
			delete(p.since, name)
		}
	}
	taintStart := p.clock.Now()
	// Candidate taints of needed nodes go; with soft taints off, every
	// one goes (a taint of an earlier configuration is not trusted).
	var stale []*apiv1.Node
	for _, n := range in.Nodes {
		if _, ok := taintTime(n, DeletionCandidateTaint); ok && (!soft || !unneeded[n.Name] && !keep[n.Name]) {
			stale = append(stale, n)
		}
	}
	p.taints.UpdateCandidates(ctx, toTaint, stale)
	if p.report != nil && soft {
		p.report.UpdateDuration(metrics.FunctionScaleDownSoftTaint, p.clock.Since(taintStart))
	}
	p.pick(ctx, plan, in)
}

// staleCandidateTaint reports whether a DeletionCandidate taint valued t is
// older than --node-deletion-candidate-ttl (0: never).
func (p *Planner) staleCandidateTaint(t, now time.Time) bool {
	return p.opts.NodeDeletionCandidateTTL > 0 && now.Sub(t) > p.opts.NodeDeletionCandidateTTL
}

func hasTaint(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// taintTime reads the unix time a taint carries as its value.
func taintTime(n *apiv1.Node, key string) (time.Time, bool) {
	for _, t := range n.Spec.Taints {
		if t.Key != key {
			continue
		}
		sec, err := strconv.ParseInt(t.Value, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		return time.Unix(sec, 0), true
	}
	return time.Time{}, false
}

func describe(c *Candidate) string {
	return fmt.Sprintf("%s (group %s, utilization %.2f, %d pods to move)", c.Node.Name, c.Group.Id(), c.Utilization, len(c.Move))
}

// blockingDetail names the pod that blocks a removal and the drain rule
// (or PodDisruptionBudget) that keeps it.
func blockingDetail(b *drain.BlockingPod) string {
	d := fmt.Sprintf("pod %s/%s: %s", b.Pod.Namespace, b.Pod.Name, b.Reason)
	if b.Detail != "" {
		d += " (" + b.Detail + ")"
	}
	return d
}
