package scaleup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/template"
)

// Input is what one scale-up decision looks at.
type Input struct {
	Now           time.Time
	Nodes         []*apiv1.Node
	ScheduledPods []*apiv1.Pod
	// Pending are the pods the scheduler could not place.
	Pending []*apiv1.Pod
}

// Increase is one node group's size increase.
type Increase struct {
	NodeGroup string
	From, To  int
	Max       int
	Pods      []*apiv1.Pod
}

// Result says what the scale-up did and why pods were left.
type Result struct {
	Increases []Increase
	// FitExisting counts pending pods that fit existing or upcoming nodes.
	FitExisting int
	// Remaining are pods no node group could help, with a reason each.
	Remaining map[*apiv1.Pod]string
	// Errors are failed increases; the loop goes on with other groups.
	Errors []error
	// NewFailures counts node groups backed off in this loop because new
	// instances failed to be created.
	NewFailures int
}

// Orchestrator runs scale-ups. It is used by one loop at a time.
type Orchestrator struct {
	provider  cloudprovider.CloudProvider
	sim       *framework.Handle
	estimator *estimator.Estimator
	chain     expander.Strategy
	opts      config.Options
	backoff   *clusterstate.Backoff
	// seenErrors are the failed instances already counted as a failure.
	seenErrors map[string]bool
}

// New builds an orchestrator.
func New(provider cloudprovider.CloudProvider, sim *framework.Handle, est *estimator.Estimator, chain expander.Strategy,
	opts config.Options) *Orchestrator {
	return &Orchestrator{provider: provider, sim: sim, estimator: est, chain: chain, opts: opts,
		backoff:    clusterstate.NewBackoff(opts.InitialNodeGroupBackoff, opts.MaxNodeGroupBackoff, opts.NodeGroupBackoffResetTimeout),
		seenErrors: map[string]bool{}}
}

// groupState is one node group as this decision sees it.
type groupState struct {
	group    cloudprovider.NodeGroup
	target   int
	started  int // registered nodes that are ready, or old enough to count as unready
	failed   int // instances whose creation failed: never capacity
	template *cloudprovider.NodeInfo
	skip     string // why the group cannot be scaled up now
}

// Run makes one scale-up decision and executes it.
func (o *Orchestrator) Run(ctx context.Context, in Input) (Result, error) {
	logger := klog.FromContext(ctx)
	res := Result{Remaining: map[*apiv1.Pod]string{}}
	groups, excluded, err := o.observeGroups(ctx, in)
	if err != nil {
		return res, err
	}
	res.NewFailures = o.registerFailures(ctx, in.Now, groups)
	o.buildSnapshot(ctx, in, groups, excluded)

	pending := o.dropExpendable(in.Pending)
	remaining := o.fitExisting(ctx, pending)
	res.FitExisting = len(pending) - len(remaining)
	if len(remaining) == 0 {
		return res, nil
	}

	totals := o.clusterTotals(in, groups, excluded)
	podGroups := estimator.GroupPods(remaining)
	for len(podGroups) > 0 {
		options, infos, reasons := o.options(ctx, podGroups, groups, totals)
		if len(options) == 0 {
			for _, g := range podGroups {
				for _, p := range g.Pods {
					res.Remaining[p] = reasons
				}
			}
			break
		}
		best := o.chain.BestOption(ctx, options, infos)
		if best == nil {
			for _, g := range podGroups {
				for _, p := range g.Pods {
					res.Remaining[p] = "expansion options filtered out"
				}
			}
			break
		}
		gs := groups[best.NodeGroup.Id()]
		if err := best.NodeGroup.IncreaseSize(ctx, best.NodeCount); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("increasing node group %q by %d: %w", gs.group.Id(), best.NodeCount, err))
			gs.skip = "scale-up execution failed"
			continue
		}
		logger.Info("Scaled up node group", "nodeGroup", gs.group.Id(), "from", gs.target, "to", gs.target+best.NodeCount,
			"max", gs.group.MaxSize(), "pods", len(best.Pods))
		res.Increases = append(res.Increases, Increase{NodeGroup: gs.group.Id(), From: gs.target,
			To: gs.target + best.NodeCount, Max: gs.group.MaxSize(), Pods: best.Pods})
		gs.target += best.NodeCount
		totals.add(best.NodeCount, gs.template)
		podGroups = without(podGroups, best.Pods)
	}
	return res, nil
}

// observeGroups reads every node group's target and template and counts
// its started nodes. Nodes of a group that have not started yet are
// returned in excluded: the decision sees them as upcoming template nodes.
func (o *Orchestrator) observeGroups(ctx context.Context, in Input) (map[string]*groupState, map[string]bool, error) {
	ngs, err := o.provider.NodeGroups(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing node groups: %w", err)
	}
	groups := make(map[string]*groupState, len(ngs))
	for _, ng := range ngs {
		gs := &groupState{group: ng}
		if gs.target, err = ng.TargetSize(ctx); err != nil {
			return nil, nil, fmt.Errorf("reading the target size of %q: %w", ng.Id(), err)
		}
		switch tmpl, err := ng.TemplateNodeInfo(ctx); {
		case errors.Is(err, cloudprovider.ErrNotImplemented):
			gs.skip = "no template node"
		case err != nil:
			gs.skip = fmt.Sprintf("template node unavailable: %v", err)
		default:
			gs.template = tmpl
		}
		groups[ng.Id()] = gs
	}
	excluded := map[string]bool{}
	for _, n := range in.Nodes {
		ng, err := o.provider.NodeGroupForNode(ctx, n)
		if err != nil || ng == nil || groups[ng.Id()] == nil {
			continue
		}
		if clusterstate.NodeReadiness(n, in.Now, o.opts.NodeGroupDefaults.MaxNodeStartupTime) == clusterstate.NotStarted {
			excluded[n.Name] = true
			continue
		}
		groups[ng.Id()].started++
	}
	return groups, excluded, nil
}

// upcoming is how many of the group's nodes are still to come.
func (gs *groupState) upcoming() int { return max(0, gs.target-gs.started-gs.failed) }

// registerFailures backs off every group with instances that failed to be
// created since the last loop, at once: an out-of-capacity group is left for
// the next one in seconds, not after --max-node-provision-time. It returns
// the number of groups newly backed off.
func (o *Orchestrator) registerFailures(ctx context.Context, now time.Time, groups map[string]*groupState) int {
	logger := klog.FromContext(ctx)
	seen := map[string]bool{}
	newFailures := 0
	for id, gs := range groups {
		instances, err := gs.group.Nodes(ctx)
		if err != nil {
			logger.Error(err, "Listing instances of node group", "nodeGroup", id)
			continue
		}
		var reason *cloudprovider.InstanceErrorInfo
		for _, in := range instances {
			if in.Status == nil || in.Status.ErrorInfo == nil {
				continue
			}
			gs.failed++
			seen[in.Id] = true
			if !o.seenErrors[in.Id] {
				reason = in.Status.ErrorInfo
			}
		}
		if reason != nil {
			until := o.backoff.RegisterFailure(id, clusterstate.BackoffReason{ErrorCode: reason.ErrorCode,
				ErrorMessage: reason.ErrorMessage}, now)
			logger.Info("Node group backed off after failed instance creations", "nodeGroup", id,
				"errorClass", reason.ErrorClass.String(), "errorCode", reason.ErrorCode, "until", until)
			newFailures++
		}
		if off, why := o.backoff.BackedOff(id, now); off && gs.skip == "" {
			gs.skip = "in backoff after failed scale-up"
			logger.V(4).Info("Node group in back-off", "nodeGroup", id, "errorCode", why.ErrorCode)
		}
	}
	o.seenErrors = seen // forget instances that are gone
	return newFailures
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
	snap := o.sim.Snapshot()
	snap.Reset(nodes, in.ScheduledPods)
	for id, gs := range groups {
		if gs.template == nil {
			continue
		}
		klog.FromContext(ctx).V(4).Info("Node group", "nodeGroup", id, "target", gs.target, "started", gs.started,
			"failed", gs.failed, "upcoming", gs.upcoming())
		for i := 0; i < gs.upcoming(); i++ {
			node, pods := template.Clone(gs.template, "upcoming-"+id, i)
			_ = snap.AddNode(node, pods...) // names are unique per group and index
		}
	}
}

// dropExpendable leaves out pods below --expendable-pods-priority-cutoff.
func (o *Orchestrator) dropExpendable(pods []*apiv1.Pod) []*apiv1.Pod {
	out := pods[:0:0]
	for _, p := range pods {
		if p.Spec.Priority != nil && int(*p.Spec.Priority) < o.opts.ExpendablePodsPriorityCutoff {
			continue
		}
		out = append(out, p)
	}
	return out
}

// fitExisting places on the snapshot the pending pods that fit existing or
// upcoming nodes, and returns the others. Pods of a group that do not
// interact are placed in one pass over the nodes: a node that rejects one of
// them rejects its twins too, so it is not asked again for that group.
func (o *Orchestrator) fitExisting(ctx context.Context, pending []*apiv1.Pod) []*apiv1.Pod {
	logger := klog.FromContext(ctx)
	snap := o.sim.Snapshot()
	nodes := snap.NodeNames()
	var rest []*apiv1.Pod
	for _, g := range estimator.GroupPods(pending) {
		if g.Interacting {
			for _, p := range g.Pods {
				node, err := o.sim.FitAnywhere(ctx, p, nil)
				if err == nil {
					err = snap.AddPod(p, node)
				}
				if err != nil {
					rest = append(rest, p)
				}
			}
			continue
		}
		check := o.sim.Prepare(ctx, g.Representative())
		if err := check.Err(); err != nil {
			logger.V(4).Info("Pending pods fit no node", "pod", klog.KObj(g.Representative()), "count", len(g.Pods), "reason", err)
			rest = append(rest, g.Pods...)
			continue
		}
		req := framework.RequestOf(g.Representative())
		pods := g.Pods
		for _, node := range nodes {
			for len(pods) > 0 && snap.HasRoom(node, req) && check.Fits(ctx, node) == nil {
				if err := snap.AddPod(pods[0], node); err != nil {
					break
				}
				pods = pods[1:]
			}
			if len(pods) == 0 {
				break
			}
		}
		if len(pods) > 0 {
			logger.V(4).Info("Pending pods fit no existing or upcoming node", "pod", klog.KObj(g.Representative()), "count", len(pods))
		}
		rest = append(rest, pods...)
	}
	return rest
}

// options estimates every eligible group; reasons summarises why there are none.
func (o *Orchestrator) options(ctx context.Context, podGroups []*estimator.Group, groups map[string]*groupState,
	totals *totals) ([]expander.Option, map[string]*cloudprovider.NodeInfo, string) {
	var options []expander.Option
	infos := map[string]*cloudprovider.NodeInfo{}
	reasons := map[string]int{}
	for id, gs := range groups {
		if gs.skip != "" {
			reasons[gs.skip]++
			continue
		}
		room := gs.group.MaxSize() - gs.target
		if room <= 0 {
			reasons["max node group size reached"]++
			continue
		}
		limits := estimator.Limits{
			MaxNodes:       min(room, o.opts.MaxNodesPerScaleUp, totals.nodeRoom(o.opts.MaxNodesTotal)),
			MaxMilliCPU:    totals.cpuRoom(o.opts.Cores.Max),
			MaxMemoryBytes: totals.memoryRoom(o.opts.MemoryGiB.Max),
			Budget:         o.opts.MaxNodeGroupBinpackingDuration,
		}
		if limits.MaxNodes <= 0 || limits.MaxMilliCPU < 0 || limits.MaxMemoryBytes < 0 {
			reasons["cluster limits reached"]++
			continue
		}
		est, err := o.estimator.Estimate(ctx, podGroups, gs.template, id, limits)
		if err != nil {
			reasons[fmt.Sprintf("estimate failed: %v", err)]++
			continue
		}
		if est.NodeCount == 0 {
			reason := "it wouldn't fit if a new node is added"
			if est.LimitedBy != estimator.LimitNone {
				reason = fmt.Sprintf("limited by %s", est.LimitedBy)
			}
			reasons[reason]++
			continue
		}
		options = append(options, expander.Option{NodeGroup: gs.group, NodeCount: est.NodeCount, Pods: est.Scheduled,
			Debug: fmt.Sprintf("%s: %d nodes for %d pods", id, est.NodeCount, len(est.Scheduled))})
		infos[id] = gs.template
	}
	return options, infos, summarise(reasons)
}

func summarise(reasons map[string]int) string {
	if len(reasons) == 0 {
		return "no node group"
	}
	// Sorted, so the same situation gives the same event message every loop
	// and client-go can fold the repeats.
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// without removes the helped pods from the groups.
func without(groups []*estimator.Group, helped []*apiv1.Pod) []*estimator.Group {
	gone := make(map[*apiv1.Pod]bool, len(helped))
	for _, p := range helped {
		gone[p] = true
	}
	var out []*estimator.Group
	for _, g := range groups {
		var keep []*apiv1.Pod
		for _, p := range g.Pods {
			if !gone[p] {
				keep = append(keep, p)
			}
		}
		if len(keep) > 0 {
			out = append(out, &estimator.Group{Pods: keep, Interacting: g.Interacting})
		}
	}
	return out
}
