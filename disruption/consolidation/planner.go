package consolidation

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// Annotations that protect nodes and pods.
const (
	// ScaleDownDisabledAnnotation "true" on a node keeps it (upstream's).
	ScaleDownDisabledAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// DoNotDisruptAnnotation "true" on a node or on one of its pods keeps
	// the node (Karpenter's, for users migrating from it).
	DoNotDisruptAnnotation = "karpenter.sh/do-not-disrupt"
)

// Why a node is not a candidate (Result.NotCandidates).
const (
	ReasonNotAutoscaled     = "NotAutoscaled"
	ReasonScaleDownDisabled = "ScaleDownDisabledAnnotation"
	ReasonDoNotDisrupt      = "DoNotDisruptAnnotation"
	ReasonPodDoNotDisrupt   = "PodDoNotDisruptAnnotation"
	ReasonBlockedByPod      = "BlockedByPod"
	ReasonTooYoung          = "YoungerThanSettleTime"
	ReasonMinSize           = "NodeGroupMinSizeReached"
	ReasonBeingDeleted      = "CurrentlyBeingDeleted"
	ReasonNotReady          = "NotReady"
	ReasonBooked            = "BookedCapacity"
	ReasonProtected         = "Protected"
	ReasonNotInSimulation   = "NotInSimulation"
	// ReasonNoPlaceToMovePods: the node's pods fit neither on the other
	// nodes nor with a replacement worth its price.
	ReasonNoPlaceToMovePods = "NoPlaceToMovePods"
	// ReasonReserved: the node's group runs on reserved capacity, paid
	// for whether it runs a node or not.
	ReasonReserved = "ReservedCapacity"
	// ReasonOutOfBudget: the plan's work budget ran out before the node.
	ReasonOutOfBudget = "OutOfSimulationBudget"
)

// Group is one node group as the plan sees it.
type Group struct {
	ID string
	// Nodes are the names of the group's registered nodes.
	Nodes []string
	// Size is the group's target size; Min and Max its bounds.
	Size, Min, Max int
	// Reserved: the group's nodes run on reserved capacity paid for
	// whether used or not (its template carries
	// cloudprovider.CapacityReservationIDLabel): removing one saves
	// nothing, so they are no candidates (they stay destinations).
	Reserved bool
	// Template is the NodeInfo a new node of the group would be (the
	// scale-up session's, DaemonSet pods included); nil when the group
	// may not be a replacement (no template, backed off, unhealthy, a
	// processor excluded it).
	Template *cloudprovider.NodeInfo
}

// Input is what one plan looks at.
type Input struct {
	Now time.Time
	// Sim is the loop's scheduler framework over its snapshot (the
	// scale-up session's, after the scale-up placed pending pods and
	// bookings). Plan forks the snapshot and reverts it before returning.
	Sim *framework.Handle
	// Nodes are the registered nodes: the candidates, and the only nodes
	// moved pods may go to (not upcoming template nodes).
	Nodes []*apiv1.Node
	// Pods are the scheduled pods as observed (bound, not terminal). A node
	// on which the snapshot holds a pod that is none of these holds
	// capacity the loop booked or gave a pending pod, and is kept; a pod
	// observed on another node that the snapshot holds here (an earlier
	// simulated removal of the loop, scale-down's, moved it) moves again
	// with the node.
	Pods   []*apiv1.Pod
	Groups []Group
	// Pricing prices nodes; nil: delete-only consolidation.
	Pricing cloudprovider.PricingModel
	// Rules are the drain rules (which pods move, which block); PDBs the
	// disruption budgets as observed (nil: none known).
	Rules *drain.Rules
	PDBs  *drain.PDBs
	// Deleting names nodes whose removal is under way or planned elsewhere
	// (the engine's, scale-down's): neither candidates nor destinations.
	Deleting map[string]bool
	// Protected, when set, says which nodes something else holds (a
	// ProvisioningRequest's nodes) and why: they are not candidates, as the
	// engine would not disrupt them (they stay destinations).
	Protected func(node string) (bool, string)
	// BudgetLeft, when set, says per node group how many more of its nodes
	// may start being disrupted now (the engine's budgets): a replacement
	// takes at most that many nodes of a group, since the engine starts a
	// set with new capacity only when the budget allows all of it. A group
	// it does not name is not limited.
	BudgetLeft map[string]int
}

// Result is one plan: the candidates, best saving first, and why each
// other node of a group is not one.
type Result struct {
	Candidates    []disruption.Candidate
	NotCandidates map[string]string
	// Simulations is the number of node removals simulated.
	Simulations int
	// Unsettled names the nodes being deleted (Input.Deleting) some of whose
	// pods fit on no node that stays: for a removal planned without new
	// capacity, the reason it was planned for no longer holds.
	Unsettled map[string]bool
}

// Planner plans consolidation; it keeps no state between plans.
type Planner struct {
	opts  Options
	clock clock.PassiveClock
}

// Option configures a Planner.
type Option func(*Planner)

// WithClock replaces the real clock that times the plan (Options.Timeout).
func WithClock(c clock.PassiveClock) Option { return func(p *Planner) { p.clock = c } }

// NewPlanner builds a planner.
func NewPlanner(opts Options, options ...Option) *Planner {
	p := &Planner{opts: opts, clock: clock.RealClock{}}
	for _, o := range options {
		o(p)
	}
	return p
}

// Plan returns the consolidation candidates of in, best saving first.
func (p *Planner) Plan(ctx context.Context, in Input) []disruption.Candidate {
	return p.PlanDetailed(ctx, in).Candidates
}

// PlanDetailed is Plan with the reasons of the nodes left out.
func (p *Planner) PlanDetailed(ctx context.Context, in Input) Result {
	logger := klog.FromContext(ctx)
	res := Result{NotCandidates: map[string]string{}, Unsettled: map[string]bool{}}
	w := p.newWork(ctx, in, res.NotCandidates)
	snap := in.Sim.Snapshot()
	snap.Fork()
	defer snap.Revert()
	w.sim = newSim(in.Sim, w.destinations())
	for _, n := range p.settleDraining(ctx, w) {
		res.Unsettled[n] = true
	}

	deletes, rest := p.deleteOnly(ctx, w)
	res.Candidates = append(res.Candidates, p.deleteCandidates(w, deletes)...)
	if in.Pricing != nil {
		res.Candidates = append(res.Candidates, p.replacements(ctx, w, &rest)...)
	}
	for _, ns := range rest {
		if _, ok := res.NotCandidates[ns.node.Name]; !ok {
			res.NotCandidates[ns.node.Name] = ReasonNoPlaceToMovePods
		}
	}
	sort.SliceStable(res.Candidates, func(i, j int) bool {
		return res.Candidates[i].SavingPerHour > res.Candidates[j].SavingPerHour
	})
	res.Simulations = w.sim.tries
	if v := logger.V(2); v.Enabled() {
		v.Info("Consolidation plan", "candidates", len(res.Candidates), "considered", len(w.order),
			"notCandidates", len(res.NotCandidates), "why", reasonCounts(res.NotCandidates), "simulations", w.sim.tries,
			"outOfBudget", w.outOfBudget)
	}
	return res
}

// nodeState is one candidate node.
type nodeState struct {
	node  *apiv1.Node
	group *groupState
	// move are the pods to evict, largest first.
	move []*apiv1.Pod
	// waiting counts the pods of move that a PDB allowing no disruption
	// now covers.
	waiting int
	price   float64
	priced  bool
	value   float64
}

type groupState struct {
	*Group
	// removed and added count the plan's removals and replacements.
	removed, added int
	price          float64
	priced         bool
}

func (g *groupState) canRemove() bool { return g.Size-g.removed > g.Min }
func (g *groupState) canAdd() bool    { return g.Template != nil && g.Size+g.added < g.Max }

// work is one plan's state.
type work struct {
	in      Input
	groups  []*groupState
	groupOf map[string]*groupState
	order   []*nodeState // candidates, best first
	keepers []string     // destinations that are not candidates, by name
	// draining are the nodes being deleted, with the pods their drain
	// evicts: those need room too.
	draining    []*nodeState
	allPriced   bool
	sim         *sim
	deadline    time.Time
	outOfBudget bool
	// reasons is Result.NotCandidates.
	reasons map[string]string
	clock   clock.PassiveClock
	opts    Options
}

// budgetLeft reports whether one more removal may be simulated.
func (w *work) budgetLeft() bool {
	if w.sim.tries >= w.opts.MaxSimulations || (w.opts.Timeout > 0 && !w.clock.Now().Before(w.deadline)) {
		w.outOfBudget = true
		return false
	}
	return true
}

// destinations are the nodes moved pods may go to, those least likely to
// go first: the keepers, then the candidates from the last to the first.
func (w *work) destinations() []string {
	out := append([]string(nil), w.keepers...)
	for i := len(w.order) - 1; i >= 0; i-- {
		out = append(out, w.order[i].node.Name)
	}
	return out
}

// newWork sorts the nodes into candidates (with their pods to move, price
// and value) and the rest (with a reason, for the autoscaled ones).
func (p *Planner) newWork(ctx context.Context, in Input, reasons map[string]string) *work {
	logger := klog.FromContext(ctx)
	w := &work{in: in, groupOf: map[string]*groupState{}, allPriced: in.Pricing != nil, clock: p.clock, opts: p.opts,
		deadline: p.clock.Now().Add(p.opts.Timeout), reasons: reasons}
	for i := range in.Groups {
		g := &groupState{Group: &in.Groups[i]}
		w.groups = append(w.groups, g)
		for _, n := range g.Nodes {
			w.groupOf[n] = g
		}
		if in.Pricing != nil && g.Template != nil && g.Template.Node != nil {
			g.price, g.priced = p.price(ctx, in, g.Template.Node)
		}
	}
	sort.Slice(w.groups, func(i, j int) bool { return w.groups[i].ID < w.groups[j].ID })
	observed := framework.PodsByNode(in.Pods)
	byUID := make(map[types.UID]*apiv1.Pod, len(in.Pods))
	for _, pod := range in.Pods {
		byUID[pod.UID] = pod
	}
	nodes := append([]*apiv1.Node(nil), in.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	snap := in.Sim.Snapshot()
	for _, n := range nodes {
		simulated, err := snap.Pods(n.Name)
		if err != nil {
			reasons[n.Name] = ReasonNotInSimulation
			continue
		}
		if in.Deleting[n.Name] || hasTaint(n, clusterstate.ToBeDeletedTaint) {
			reasons[n.Name] = ReasonBeingDeleted
			moved, _ := carriedPods(n.Name, simulated, byUID)
			w.draining = append(w.draining, &nodeState{node: n, move: slices.Concat(evicted(observed[n.Name]), moved)})
			continue
		}
		if !ready(n) {
			reasons[n.Name] = ReasonNotReady
			continue
		}
		moved, booked := carriedPods(n.Name, simulated, byUID)
		ns, reason := p.eligible(n, w.groupOf[n.Name], observed[n.Name], booked, in)
		if reason != "" {
			w.keepers = append(w.keepers, n.Name)
			if reason != ReasonNotAutoscaled {
				reasons[n.Name] = reason
			}
			logger.V(4).Info("Node is not a consolidation candidate", "node", n.Name, "reason", reason)
			continue
		}
		ns.move = append(ns.move, moved...)
		if in.Pricing != nil {
			ns.price, ns.priced = p.price(ctx, in, n)
		}
		w.allPriced = w.allPriced && ns.priced
		w.order = append(w.order, ns)
	}
	for _, ns := range w.order {
		// What is saved per pod disrupted; an empty node costs next to
		// nothing, and goes first among nodes of its price.
		cost := 0.01 + float64(len(ns.move)) + p.opts.PDBBlockedPodWeight*float64(ns.waiting)
		worth := proxyPrice(ns.node)
		if w.allPriced {
			worth = ns.price
		}
		ns.value = worth / cost
	}
	last := w.cheapestPerSize()
	sort.SliceStable(w.order, func(i, j int) bool {
		if li, lj := last[w.order[i]], last[w.order[j]]; li != lj {
			return lj
		}
		return w.order[i].value > w.order[j].value
	})
	return w
}

// cheapestPerSize names the candidates with pods to move whose price per
// size (proxyPrice) is within 2% of the lowest of any priced group's new
// node: the nodes a cost-minded end state keeps. They go after the others,
// so that the pods of the dearer nodes move onto them rather than theirs
// onto nodes a later plan empties (a pod moved twice). Empty only when not
// all nodes are priced, or when every candidate is of that price.
func (w *work) cheapestPerSize() map[*nodeState]bool {
	if !w.allPriced {
		return nil
	}
	best := -1.0
	for _, g := range w.groups {
		if g.priced && g.Template != nil && g.Template.Node != nil {
			if size := proxyPrice(g.Template.Node); size > 0 && (best < 0 || g.price/size < best) {
				best = g.price / size
			}
		}
	}
	if best < 0 {
		return nil
	}
	out := map[*nodeState]bool{}
	for _, ns := range w.order {
		if size := proxyPrice(ns.node); len(ns.move) > 0 && size > 0 && ns.price/size <= best*1.02 {
			out[ns] = true
		}
	}
	if len(out) == len(w.order) {
		return nil
	}
	return out
}

// eligible applies the protections to one node of the simulation; it
// returns the candidate or why the node is not one.
func (p *Planner) eligible(n *apiv1.Node, g *groupState, pods []*apiv1.Pod, booked bool, in Input) (*nodeState, string) {
	switch {
	case g == nil:
		return nil, ReasonNotAutoscaled
	case g.Reserved:
		return nil, ReasonReserved
	case n.Annotations[ScaleDownDisabledAnnotation] == "true":
		return nil, ReasonScaleDownDisabled
	case n.Annotations[DoNotDisruptAnnotation] == "true":
		return nil, ReasonDoNotDisrupt
	case in.Now.Sub(n.CreationTimestamp.Time) < p.opts.SettleTime:
		return nil, ReasonTooYoung
	case !g.canRemove():
		return nil, ReasonMinSize
	}
	// The hook first: it names the request whose booking holds the node.
	if in.Protected != nil {
		if ok, why := in.Protected(n.Name); ok {
			return nil, ReasonProtected + ": " + why
		}
	}
	if booked {
		return nil, ReasonBooked
	}
	for _, pod := range pods {
		if pod.Annotations[DoNotDisruptAnnotation] == "true" && !drain.IsDaemonSetPod(pod) && !drain.IsMirrorPod(pod) {
			return nil, ReasonPodDoNotDisrupt
		}
	}
	move, _, blocking := in.Rules.Classify(pods, nil, in.Now)
	if blocking != nil {
		return nil, fmt.Sprintf("%s: pod %s/%s: %s", ReasonBlockedByPod, blocking.Pod.Namespace, blocking.Pod.Name, blocking.Reason)
	}
	ns := &nodeState{node: n, group: g, move: sortedBySize(move)}
	if in.PDBs != nil {
		for _, pod := range move {
			if _, _, b := in.Rules.Classify([]*apiv1.Pod{pod}, in.PDBs.Fork(), in.Now); b != nil && b.Reason == drain.NotEnoughPdb {
				ns.waiting++
			}
		}
	}
	return ns, ""
}

// carriedPods returns the observed pods of other nodes the snapshot holds
// on node (moved there by an earlier simulated removal), as observed, in
// the snapshot's order; booked is set when it holds a pod that was not
// observed at all.
func carriedPods(node string, simulated []*apiv1.Pod, byUID map[types.UID]*apiv1.Pod) (carried []*apiv1.Pod, booked bool) {
	for _, sp := range simulated {
		op, ok := byUID[sp.UID]
		switch {
		case !ok:
			booked = true
		case op.Spec.NodeName != node:
			carried = append(carried, op)
		}
	}
	return carried, booked
}

// evicted are the pods a drain evicts: not DaemonSet or mirror pods.
func evicted(pods []*apiv1.Pod) []*apiv1.Pod {
	var out []*apiv1.Pod
	for _, p := range pods {
		if !drain.IsDaemonSetPod(p) && !drain.IsMirrorPod(p) {
			out = append(out, p)
		}
	}
	return sortedBySize(out)
}

// price is what node costs per hour, per in.Pricing.
func (p *Planner) price(ctx context.Context, in Input, n *apiv1.Node) (float64, bool) {
	v, err := in.Pricing.NodePrice(ctx, n, in.Now, in.Now.Add(time.Hour))
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Node could not be priced; consolidation is delete-only", "node", n.Name, "err", err)
		return 0, false
	}
	return v, true
}

// proxyPrice orders nodes by size when prices are unknown: cores plus
// memory at 4 GiB a core.
func proxyPrice(n *apiv1.Node) float64 {
	a := n.Status.Allocatable
	return a.Cpu().AsApproximateFloat64() + a.Memory().AsApproximateFloat64()/(4<<30)
}

// sortedBySize returns pods, largest request first (a node whose pods do
// not fit fails on its first), then by namespace and name.
func sortedBySize(pods []*apiv1.Pod) []*apiv1.Pod {
	out := append([]*apiv1.Pod(nil), pods...)
	reqs := make(map[*apiv1.Pod]framework.Request, len(out))
	for _, p := range out {
		reqs[p] = framework.RequestOf(p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := reqs[out[i]], reqs[out[j]]
		if a.MilliCPU != b.MilliCPU {
			return a.MilliCPU > b.MilliCPU
		}
		if a.Memory != b.Memory {
			return a.Memory > b.Memory
		}
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func hasTaint(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func ready(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

// reasonCounts counts the nodes left out per reason, the reason's first
// word only (a blocking pod's or a protection's details go to explain).
func reasonCounts(reasons map[string]string) map[string]int {
	out := map[string]int{}
	for _, why := range reasons {
		if i := strings.IndexByte(why, ':'); i >= 0 {
			why = why[:i]
		}
		out[why]++
	}
	return out
}
