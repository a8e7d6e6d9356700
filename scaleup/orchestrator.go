package scaleup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/template"
)

// Input is what one scale-up decision looks at.
type Input struct {
	Now           time.Time
	Nodes         []*apiv1.Node
	ScheduledPods []*apiv1.Pod
	// Pending are the pods the scheduler could not place. Begin puts those
	// the scheduler nominated to a node (status.nominatedNodeName) on that
	// node when they fit there after its preemption (see nominated.go); a
	// loop passes all its pending pods, so that every session it begins,
	// the scale-down's too, counts them there.
	Pending []*apiv1.Pod
	// Excluded are node groups this loop must not grow (the loop's
	// node-group-list processors), by id, with the reason why.
	Excluded map[string]string
}

// Increase is one node group's size increase.
type Increase struct {
	NodeGroup string
	From, To  int
	Max       int
	// Pods are the pods the decision is for; increases of one balanced
	// decision share them and the same Decision number.
	Pods     []*apiv1.Pod
	Decision int
}

// Result says what the scale-up did and why pods were left.
type Result struct {
	Increases []Increase
	// FitExisting counts pending pods that fit existing or upcoming nodes.
	FitExisting int
	// Skipped counts pending pods not checked against existing and upcoming
	// nodes, nor scaled up for, in this loop: --enable-graceful-degradation
	// and --pending-pods-batching-timeout ran out.
	Skipped int
	// Nominated counts pending pods counted on the node the scheduler
	// nominated them to (Begin placed them there).
	Nominated int
	// Remaining are pods no node group could help, with a reason each.
	Remaining map[*apiv1.Pod]string
	// Errors are failed increases; the loop goes on with other groups.
	Errors []error
}

// Orchestrator runs scale-ups. It is used by one loop at a time.
type Orchestrator struct {
	provider   cloudprovider.CloudProvider
	sim        *framework.Handle
	estimator  *estimator.Estimator
	chain      expander.Strategy
	opts       Options
	state      *clusterstate.Registry
	daemonSets DaemonSetLister
	quotas     QuotaSource
	sanitizer  template.Sanitizer
	taints     clusterstate.Taints
	// fromNodes are templates made from real nodes, kept for when a group
	// that has no TemplateNodeInfo has no usable node left.
	fromNodes map[string]*cloudprovider.NodeInfo
	// fromNodesAt is when each of fromNodes was made (--node-info-cache-expire-time).
	fromNodesAt map[string]time.Time
	// skippedLast are the pods the last scale-up skipped (graceful
	// degradation), each with its group's rank among the skipped ones: the
	// next one checks their groups first, in that order.
	skippedLast map[types.UID]int
	// countDeletions records rolled back instances (deleted_nodes_total).
	countDeletions func(reason string, n int)
	// instancePods tells a rollback what runs on its instances' nodes.
	instancePods InstancePods
	templates    []TemplateProcessor
	report       Reporter
	// clock times the estimates of one scale-up (--max-binpacking-time).
	clock clock.PassiveClock
	// explain, when set, keeps the verdicts of each scale-up (WithExplainer).
	explain *explain.Recorder
}

// TemplateProcessor adjusts a node group's template NodeInfo, after it was
// read from the provider or made from a real node and given its DaemonSet
// pods, before the session simulates with it. It must not modify the
// NodeInfo it receives (it may be the provider's or a cached one): it
// returns a new one, or the same when nothing changes. An error leaves the
// group out of the session's scale-ups, with the error as the reason.
type TemplateProcessor interface {
	ProcessTemplate(ctx context.Context, group cloudprovider.NodeGroup, info *cloudprovider.NodeInfo) (*cloudprovider.NodeInfo, error)
}

// WithTemplateProcessors runs the template processors, in order, on every
// node group's template in each session.
func WithTemplateProcessors(ps ...TemplateProcessor) Option {
	return func(o *Orchestrator) { o.templates = append(o.templates, ps...) }
}

// DaemonSetLister lists the DaemonSets whose pods templates carry.
type DaemonSetLister interface {
	List(selector labels.Selector) ([]*appsv1.DaemonSet, error)
}

// Option configures an Orchestrator.
type Option func(*Orchestrator)

// WithDeletionCounter counts the instances a rollback deletes, by reason.
func WithDeletionCounter(count func(reason string, n int)) Option {
	return func(o *Orchestrator) { o.countDeletions = count }
}

// WithOrchestratorClock replaces the real clock that times a scale-up's
// estimates.
func WithOrchestratorClock(c clock.PassiveClock) Option { return func(o *Orchestrator) { o.clock = c } }

// QuotaSource lists the CapacityQuotas scale-up respects.
type QuotaSource interface {
	Quotas(ctx context.Context) []capacityquota.Quota
}

// WithCapacityQuotas makes scale-up respect the CapacityQuotas src lists
// (--capacity-quotas-enabled).
func WithCapacityQuotas(src QuotaSource) Option { return func(o *Orchestrator) { o.quotas = src } }

// WithDaemonSets puts on every template the pods of the DaemonSets that
// would run on it.
func WithDaemonSets(l DaemonSetLister) Option { return func(o *Orchestrator) { o.daemonSets = l } }

// New builds an orchestrator. state must have been updated in the same loop
// before Run.
func New(provider cloudprovider.CloudProvider, sim *framework.Handle, est *estimator.Estimator, chain expander.Strategy,
	opts Options, state *clusterstate.Registry, options ...Option) *Orchestrator {
	o := &Orchestrator{provider: provider, sim: sim, estimator: est, chain: chain, opts: opts, state: state,
		sanitizer: template.Sanitizer{DropTaints: append(append(append([]string(nil), opts.Taints.StartupTaints...),
			opts.Taints.StatusTaints...), opts.Taints.IgnoreTaints...), DropTaintPrefixes: opts.Taints.StartupTaintPrefixes,
			ForceDaemonSets: opts.ForceDaemonSets, ScaleFromUnschedulable: opts.ScaleFromUnschedulable},
		taints: clusterstate.NewTaints(opts.Taints), fromNodes: map[string]*cloudprovider.NodeInfo{},
		fromNodesAt: map[string]time.Time{}, clock: clock.RealClock{},
		report: nopReporter{}}
	for _, opt := range options {
		opt(o)
	}
	return o
}

// groupState is one node group as this decision sees it.
type groupState struct {
	group    cloudprovider.NodeGroup
	counts   clusterstate.NodeCounts
	target   int
	template *cloudprovider.NodeInfo
	skip     string // why the group cannot be scaled up now
	// zeroOrMax: the group goes from empty to its max size in one atomic
	// increase, or not at all (its zeroOrMaxNodeScaling option).
	zeroOrMax bool
	// backoffUntil and backoffMessage say when the group's back-off ends
	// and the error that caused it; excluded, that a processor left it
	// out. For the explainer.
	backoffUntil   time.Time
	backoffMessage string
	excluded       bool
}

// Run makes one scale-up decision for in.Pending and executes it.
func (o *Orchestrator) Run(ctx context.Context, in Input) (Result, error) {
	return o.Begin(ctx, in).ScaleUp(ctx, in.Pending), nil
}

// Session is one loop's scale-up work on one snapshot of the cluster with
// its upcoming nodes. Work done through it in order shares the capacity:
// what one step places, the next does not see as free.
type Session struct {
	o        *Orchestrator
	in       Input
	groups   map[string]*groupState
	excluded map[string]bool
	totals   *totals
	decision int
	added    int // nodes added through this session
	// moved holds, by node, the pods earlier simulated removals of this
	// session moved onto it (the original objects, not the bound copies the
	// snapshot holds): removing that node too must move them again.
	moved map[string][]*apiv1.Pod
	// moveNext is where the removal simulation looks for the next moved
	// pod's node (framework.Handle.FitFrom).
	moveNext int
	// checkMemo lends the PreFilter result of a moved pod to the pods of
	// the same workload moved after it (prepare); freshChecks turns it off.
	checkMemo   *framework.CheckMemo
	freshChecks bool
	// nominated are the pending pods Begin placed on the node the
	// scheduler nominated them to, by UID, with that node.
	nominated map[types.UID]string
}

// Added is the number of nodes the session's scale-ups added.
func (s *Session) Added() int { return s.added }

// Begin observes the node groups and loads the snapshot for one loop.
func (o *Orchestrator) Begin(ctx context.Context, in Input) *Session {
	groups, excluded := o.observeGroups(ctx, in)
	o.buildSnapshot(ctx, in, groups, excluded)
	return &Session{o: o, in: in, groups: groups, excluded: excluded, totals: o.clusterTotals(ctx, in, groups, excluded),
		nominated: o.placeNominated(ctx, in.Pending)}
}

// ScaleUp places the pending pods that fit existing or upcoming nodes and
// scales node groups up for the others, choosing with the expander.
func (s *Session) ScaleUp(ctx context.Context, pendingPods []*apiv1.Pod) Result {
	o, groups, totals := s.o, s.groups, s.totals
	logger := klog.FromContext(ctx)
	res := Result{Remaining: map[*apiv1.Pod]string{}}
	pendingPods, nominated := s.withoutNominated(pendingPods)
	res.Nominated = len(nominated)
	o.explain.Nominated(nominated)
	pending := o.dropExpendable(pendingPods)
	var remaining, skipped []*apiv1.Pod
	var checkUntil time.Time
	if o.opts.EnableGracefulDegradation && o.opts.PendingPodsBatchingTimeout > 0 {
		checkUntil = o.clock.Now().Add(o.opts.PendingPodsBatchingTimeout)
	}
	o.timed(metrics.FunctionFilterOutSchedulable, func() { remaining, skipped = o.fitExistingWithin(ctx, pending, checkUntil) })
	res.Skipped = len(skipped)
	o.report.SkippedPods(ctx, len(skipped))
	if len(skipped) > 0 {
		logger.Info("Pending pods skipped: their check against existing and upcoming nodes ran out of --pending-pods-batching-timeout",
			"skipped", len(skipped), "checked", len(pending)-len(skipped), "timeout", o.opts.PendingPodsBatchingTimeout)
	}
	res.FitExisting = len(pending) - len(remaining) - len(skipped)
	o.recordFitting(pending, append(remaining[:len(remaining):len(remaining)], skipped...))
	if len(remaining) == 0 {
		return res
	}
	// As upstream, pods left while the cluster is at --max-nodes-total are
	// told that, whatever else the groups say.
	atMaxTotal := o.opts.MaxNodesTotal > 0 && totals.nodeRoom(o.opts.MaxNodesTotal) <= 0
	if atMaxTotal {
		logger.V(1).Info("Max total nodes in cluster reached", "maxNodesTotal", o.opts.MaxNodesTotal)
		o.report.MaxNodesTotalReached(ctx, o.opts.MaxNodesTotal)
	}

	var podGroups []*estimator.Group
	o.timed(metrics.FunctionBuildPodEquivalenceGroups, func() { podGroups = estimator.GroupPods(remaining) })
	o.report.OverflowingControllers(overflowing(podGroups))
	// All the estimates of this scale-up share --max-binpacking-time; past
	// it, the options already estimated are all the expander sees.
	deadline := o.clock.Now().Add(o.opts.MaxBinpackingTime)
	// The pods left are checked against the skipped groups' templates
	// (simulateSkipped); the time is observed once per scale-up, as
	// upstream's, also when no pod is left.
	var simulating time.Duration
	if o.opts.ScaleUpSimulationForSkippedNodeGroups {
		defer func() { o.report.UpdateDuration(metrics.FunctionSkippedNodeGroups, simulating) }()
	}
	simulateLeft := func(left []*estimator.Group, refused *refusals) {
		if o.opts.ScaleUpSimulationForSkippedNodeGroups {
			simulating += o.simulateSkipped(ctx, left, groups, refused)
		}
	}
	for len(podGroups) > 0 {
		options, infos, refused := o.options(ctx, podGroups, groups, totals, deadline)
		message := func(g *estimator.Group) string {
			if atMaxTotal {
				return fmt.Sprintf("%s (--max-nodes-total=%d)", reasonMaxNodesTotal, o.opts.MaxNodesTotal)
			}
			return refused.message(g)
		}
		if len(options) == 0 {
			simulateLeft(podGroups, refused)
			o.recordRound(podGroups, nil, nil, refused, nil, message)
			for _, g := range podGroups {
				reason := message(g)
				for _, p := range g.Pods {
					res.Remaining[p] = reason
				}
			}
			break
		}
		best := o.chain.BestOption(ctx, options, infos)
		if best == nil {
			simulateLeft(podGroups, refused)
			o.recordRound(podGroups, options, nil, refused, nil,
				func(*estimator.Group) string { return "expansion options filtered out" })
			for _, g := range podGroups {
				for _, p := range g.Pods {
					res.Remaining[p] = "expansion options filtered out"
				}
			}
			break
		}
		s.decision++
		done := 0
		shares, served := o.balance(ctx, best, options, groups, podGroups, totals)
		o.recordRound(podGroups, options, best, refused, served, message)
		for _, sh := range shares {
			gs := sh.gs
			g := s.grow(ctx, gs, sh.delta, gs.zeroOrMax)
			if g.Err != nil {
				res.Errors = append(res.Errors, &IncreaseError{NodeGroup: gs.group.Id(), Delta: sh.delta,
					Transient: g.Transient, Err: g.Err})
				s.failed(ctx, gs, g)
			}
			if g.Added == 0 {
				continue
			}
			// What took effect is accounted for once, error or not.
			o.state.RegisterScaleUp(gs.group.Id(), g.Added, s.in.Now)
			logger.Info("Scaled up node group", "nodeGroup", gs.group.Id(), "from", gs.target, "to", gs.target+g.Added,
				"max", gs.group.MaxSize(), "pods", len(served))
			res.Increases = append(res.Increases, Increase{NodeGroup: gs.group.Id(), From: gs.target,
				To: gs.target + g.Added, Max: gs.group.MaxSize(), Pods: served, Decision: s.decision})
			gs.target += g.Added
			totals.add(g.Added, gs.template)
			s.added += g.Added
			done++
		}
		if done > 0 {
			podGroups = without(podGroups, served)
		}
	}
	return res
}

// observeGroups takes every node group's state from the registry and reads
// its template. Nodes of a group that have not started yet are returned in
// excluded: the decision sees them as upcoming template nodes.
func (o *Orchestrator) observeGroups(ctx context.Context, in Input) (map[string]*groupState, map[string]bool) {
	states := o.state.Groups()
	groups := make(map[string]*groupState, len(states))
	excluded := map[string]bool{}
	var daemonSets []*appsv1.DaemonSet
	if o.daemonSets != nil {
		var err error
		if daemonSets, err = o.daemonSets.List(labels.Everything()); err != nil {
			klog.FromContext(ctx).Error(err, "Listing DaemonSets; templates carry no DaemonSet pods this loop")
		}
	}
	var podsByNode map[string][]*apiv1.Pod
	liveSlices := o.liveSlices(ctx)
	for _, st := range states {
		ng := st.NodeGroup
		gs := &groupState{group: ng, counts: st.Counts, target: st.Target, zeroOrMax: st.Options.ZeroOrMaxNodeScaling}
		switch tmpl, err := ng.TemplateNodeInfo(ctx); {
		case errors.Is(err, cloudprovider.ErrNotImplemented):
			if podsByNode == nil {
				podsByNode = byNode(in.ScheduledPods)
			}
			gs.template = o.templateFromNodes(st, in.Now, podsByNode, daemonSets, liveSlices)
			if gs.template == nil {
				gs.skip = reasonNoTemplate
			}
		case err != nil:
			gs.skip = fmt.Sprintf("template node unavailable: %v", err)
		default:
			// A provider's template may carry start-up or status taints
			// that a new node sheds once it is ready: simulated as kept,
			// they would make every pod that does not tolerate them
			// "never fit".
			gs.template = template.AddDaemonSetPods(o.sanitizer.Template(tmpl), daemonSets)
		}
		if gs.template != nil {
			gs.template, gs.skip = o.processTemplate(ctx, ng, gs.template)
		}
		switch {
		case st.BackedOff:
			gs.skip = backoffReason(st.BackoffReason.ErrorCode)
			gs.backoffUntil, gs.backoffMessage = st.BackoffUntil, st.BackoffReason.ErrorMessage
			klog.FromContext(ctx).V(4).Info("Node group in back-off", "nodeGroup", ng.Id(), "errorCode", st.BackoffReason.ErrorCode)
		case !st.Healthy:
			gs.skip = reasonUnhealthy
		case in.Excluded[ng.Id()] != "":
			gs.skip, gs.excluded = in.Excluded[ng.Id()], true
		}
		for _, n := range st.NotStartedNodes {
			excluded[n] = true
		}
		groups[ng.Id()] = gs
	}
	return groups, excluded
}

// processTemplate runs the template processors on one group's template; on
// an error it returns no template and the reason to skip the group.
func (o *Orchestrator) processTemplate(ctx context.Context, ng cloudprovider.NodeGroup,
	info *cloudprovider.NodeInfo) (*cloudprovider.NodeInfo, string) {
	for _, p := range o.templates {
		out, err := p.ProcessTemplate(ctx, ng, info)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Template processor failed; the node group is not scaled up this loop",
				"nodeGroup", ng.Id())
			return nil, fmt.Sprintf("template processor failed: %v", err)
		}
		if out == nil {
			return nil, "template processor returned no template"
		}
		info = out
	}
	return info, ""
}

func byNode(pods []*apiv1.Pod) map[string][]*apiv1.Pod {
	out := map[string][]*apiv1.Pod{}
	for _, p := range pods {
		out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
	}
	return out
}

// upcoming is how many of the group's nodes are still to come: not yet
// registered or registered but not started. Long unregistered and failed
// instances are not capacity.
func (gs *groupState) upcoming() int {
	c := gs.counts
	return max(0, gs.target-c.Ready-c.Unready-c.LongUnregistered-c.Failed)
}

// buildSnapshot loads real nodes (but the not yet started ones) and adds one
// template clone per upcoming node of each group.
func (o *Orchestrator) buildSnapshot(ctx context.Context, in Input, groups map[string]*groupState, excluded map[string]bool) {
	nodes := make([]*apiv1.Node, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		if !excluded[n.Name] {
			nodes = append(nodes, n)
		}
	}
	// Name order, not the informer's (random) order: pending pods then go to
	// existing nodes the same way in every loop and in explain's prediction.
	slices.SortFunc(nodes, func(a, b *apiv1.Node) int { return strings.Compare(a.Name, b.Name) })
	snap := o.sim.Snapshot()
	snap.Reset(nodes, in.ScheduledPods)
	for id, gs := range groups {
		if gs.template == nil {
			continue
		}
		klog.FromContext(ctx).V(4).Info("Node group", "nodeGroup", id, "target", gs.target, "counts", gs.counts,
			"upcoming", gs.upcoming())
		for i := 0; i < gs.upcoming(); i++ {
			node, pods := template.Clone(gs.template, upcomingGroupPrefix+id, i)
			_ = snap.AddNode(node, pods...) // names are unique per group and index
			if len(gs.template.ResourceSlices) > 0 {
				snap.SetResourceSlices(node.Name,
					framework.RenamedResourceSlices(gs.template.ResourceSlices, gs.template.Node.Name, node.Name))
			}
		}
	}
}

// Upcoming nodes are named template-upcoming-<group>-<i> in the snapshot.
const (
	upcomingGroupPrefix = "upcoming-"
	upcomingPrefix      = "template-" + upcomingGroupPrefix
)

// dropExpendable leaves out pods below --expendable-pods-priority-cutoff.
// The explainer is told which, and why.
func (o *Orchestrator) dropExpendable(pods []*apiv1.Pod) []*apiv1.Pod {
	out := pods[:0:0]
	var dropped []*apiv1.Pod
	for _, p := range pods {
		if p.Spec.Priority != nil && int(*p.Spec.Priority) < o.opts.ExpendablePodsPriorityCutoff {
			dropped = append(dropped, p)
			continue
		}
		out = append(out, p)
	}
	o.explain.Expendable(dropped, o.opts.ExpendablePodsPriorityCutoff)
	return out
}

// EnforceMinSizes raises every healthy, not backed-off group whose target is
// below its min size to that size (--enforce-node-group-min-size), within
// --max-nodes-total, and returns the increases made.
func (s *Session) EnforceMinSizes(ctx context.Context) []Increase {
	logger := klog.FromContext(ctx)
	var out []Increase
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		gs := s.groups[id]
		delta := gs.group.MinSize() - gs.target
		if delta <= 0 || gs.skip != "" {
			continue
		}
		room := s.totals.nodeRoom(s.o.opts.MaxNodesTotal)
		if gs.zeroOrMax {
			// Raised to its min size means raised to its max size, at once.
			delta = gs.group.MaxSize() - gs.target
			if delta > room {
				logger.Info("Not raising a zeroOrMaxNodeScaling node group to its min size: --max-nodes-total leaves room for fewer nodes than its max size",
					"nodeGroup", id, "need", delta, "room", room)
				continue
			}
		}
		if gs.template != nil {
			if qRoom, quota, limited := s.totals.quotaRoom(gs.template.Node); limited && qRoom < delta {
				if gs.zeroOrMax {
					logger.Info("Not raising a zeroOrMaxNodeScaling node group to its min size: a CapacityQuota leaves room for fewer nodes than its max size",
						"nodeGroup", id, "need", delta, "capacityQuota", quota, "room", qRoom)
					continue
				}
				logger.Info("Raising a node group towards its min size only as far as a CapacityQuota allows",
					"nodeGroup", id, "need", delta, "capacityQuota", quota, "room", qRoom)
				room = min(room, qRoom)
			}
		}
		if delta > room {
			delta = room
		}
		if delta <= 0 {
			continue
		}
		g := s.grow(ctx, gs, delta, gs.zeroOrMax)
		if g.Err != nil {
			logger.Error(g.Err, "Raising a node group to its min size failed", "nodeGroup", id, "delta", delta,
				"added", g.Added, "transient", g.Transient)
			s.failed(ctx, gs, g)
		}
		if delta = g.Added; delta == 0 {
			continue
		}
		s.o.state.RegisterScaleUp(id, delta, s.in.Now)
		logger.Info("Raised a node group to its min size", "nodeGroup", id, "from", gs.target, "to", gs.target+delta)
		out = append(out, Increase{NodeGroup: id, From: gs.target, To: gs.target + delta, Max: gs.group.MaxSize()})
		gs.target += delta
		if gs.template != nil {
			s.totals.add(delta, gs.template)
		}
		s.added += delta
	}
	return out
}
