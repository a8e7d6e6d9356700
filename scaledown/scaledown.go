package scaledown

import (
	"context"
	"sort"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// Reporter receives the plan's numbers; metrics.Metrics implements it.
type Reporter interface {
	UpdateUnneededNodesCount(n int)
	UpdateUnremovableNodesCount(byReason map[string]int)
	UpdateScaleDownInCooldown(in bool)
	// UpdateDuration records how long a step (metrics.Function*) took.
	UpdateDuration(function string, d time.Duration)
	// UpdatePendingNodeDeletions sets the removals in flight after the step.
	UpdatePendingNodeDeletions(n int)
	// UpdateMaxNodeSkipEval sets the longest time a kept node has been kept.
	UpdateMaxNodeSkipEval(d time.Duration)
	// RegisterSkippedScaleEvent counts a removal not made because of a
	// limit: direction metrics.DirectionScaleDown, reason
	// metrics.CPUResourceLimit or metrics.MemoryResourceLimit.
	RegisterSkippedScaleEvent(direction, reason string)
}

// ScaleDown is the loop's scale-down step.
type ScaleDown struct {
	opts     Options
	planner  *Planner
	actuator *Actuator
	reporter Reporter
	// lastScaleUp is when the loop last added nodes.
	lastScaleUp time.Time
	last        *Plan
	// keptSince holds since when each node the plans keep has been kept
	// (max_node_skip_eval_duration_seconds).
	keptSince map[string]time.Time
	// explain, when set, keeps every node's verdict of the last plan.
	explain *explain.Recorder
	// planOnly: Run plans and records, and starts no removal.
	planOnly bool
}

// Option configures a ScaleDown.
type Option func(*ScaleDown)

// WithExplainer records every node's verdict, each loop, for the explainer
// (/explainz).
func WithExplainer(r *explain.Recorder) Option { return func(s *ScaleDown) { s.explain = r } }

// WithoutRemovals makes Run plan and record the verdicts without starting
// a removal (the explain command's simulated loop, which must not attempt
// a write).
func WithoutRemovals() Option { return func(s *ScaleDown) { s.planOnly = true } }

// New builds the step.
func New(opts Options, planner *Planner, actuator *Actuator, reporter Reporter, options ...Option) *ScaleDown {
	if planner != nil {
		planner.report = reporter
	}
	s := &ScaleDown{opts: opts, planner: planner, actuator: actuator, reporter: reporter, keptSince: map[string]time.Time{}}
	for _, o := range options {
		o(s)
	}
	return s
}

// ScaledUp tells the step that the loop added nodes at now
// (--scale-down-delay-after-add).
func (s *ScaleDown) ScaledUp(now time.Time) { s.lastScaleUp = now }

// Run plans and, unless in cooldown, starts removing the nodes whose time
// has come. It returns the number of removals started.
func (s *ScaleDown) Run(ctx context.Context, in Input) int {
	logger := klog.FromContext(ctx)
	if !s.opts.ScaleDownEnabled {
		s.recordDisabled(in)
		return 0 // no plan, no candidate taints
	}
	defer func() { s.reporter.UpdatePendingNodeDeletions(s.actuator.Busy()) }()
	in.deleting, in.deleted = s.actuator.InFlight(in.Nodes)
	start := s.planner.clock.Now()
	plan := s.planner.Update(ctx, in)
	s.reporter.UpdateDuration(metrics.FunctionFindUnneeded, s.planner.clock.Since(start))
	s.last = plan
	s.report(plan, in.Now)
	cooldown, why := false, ""
	if s.opts.ScaleDownDelayTypeLocal {
		plan.Removable = s.outOfGroupCooldown(ctx, plan.Removable, in)
	} else {
		cooldown, why = s.cooldown(in.Now)
	}
	s.reporter.UpdateScaleDownInCooldown(cooldown)
	s.record(plan, in, why)
	if cooldown {
		logger.V(2).Info("Scale-down in cooldown", "why", why, "unneeded", len(plan.Unneeded))
		return 0
	}
	if len(plan.Removable) == 0 || s.planOnly {
		return 0
	}
	for _, c := range plan.Removable {
		logger.V(2).Info("Node removable", "candidate", describe(c), "unneededSince", c.Since)
	}
	return s.actuator.Remove(ctx, plan.Removable)
}

func (s *ScaleDown) cooldown(now time.Time) (bool, string) {
	deleted, failed := s.actuator.Last()
	switch {
	case now.Sub(s.lastScaleUp) < s.opts.ScaleDownDelayAfterAdd:
		return true, "scale-down-delay-after-add"
	case !deleted.IsZero() && now.Sub(deleted) < s.opts.ScaleDownDelayAfterDelete:
		return true, "scale-down-delay-after-delete"
	case !failed.IsZero() && now.Sub(failed) < s.opts.ScaleDownDelayAfterFailure:
		return true, "scale-down-delay-after-failure"
	}
	return false, ""
}

// outOfGroupCooldown applies the scale-down delays per node group
// (--scale-down-delay-type-local): a group scaled up, or that lost a node or
// failed to, within the delay keeps its nodes; other groups are not held.
func (s *ScaleDown) outOfGroupCooldown(ctx context.Context, cs []*Candidate, in Input) []*Candidate {
	var out []*Candidate
	held := map[string]string{}
	for _, c := range cs {
		id := c.Group.Id()
		why, seen := held[id]
		if !seen {
			why = s.groupCooldown(id, in)
			held[id] = why
		}
		if why == "" {
			out = append(out, c)
		}
	}
	for id, why := range held {
		if why != "" {
			klog.FromContext(ctx).V(2).Info("Node group's scale-down in cooldown", "nodeGroup", id, "why", why)
		}
	}
	return out
}

func (s *ScaleDown) groupCooldown(id string, in Input) string {
	deleted, failed := s.actuator.LastOf(id)
	switch up := in.State.LastScaleUp(id); {
	case !up.IsZero() && in.Now.Sub(up) < s.opts.ScaleDownDelayAfterAdd:
		return "scale-down-delay-after-add"
	case !deleted.IsZero() && in.Now.Sub(deleted) < s.opts.ScaleDownDelayAfterDelete:
		return "scale-down-delay-after-delete"
	case !failed.IsZero() && in.Now.Sub(failed) < s.opts.ScaleDownDelayAfterFailure:
		return "scale-down-delay-after-failure"
	}
	return ""
}

func (s *ScaleDown) report(plan *Plan, now time.Time) {
	s.reporter.UpdateUnneededNodesCount(len(plan.Unneeded))
	byReason := map[string]int{}
	var longest time.Duration
	for n, r := range plan.Unremovable {
		byReason[r]++
		since, ok := s.keptSince[n]
		if !ok {
			since = now
			s.keptSince[n] = now
		}
		longest = max(longest, now.Sub(since))
	}
	for n := range s.keptSince {
		if _, ok := plan.Unremovable[n]; !ok {
			delete(s.keptSince, n)
		}
	}
	s.reporter.UpdateUnremovableNodesCount(byReason)
	s.reporter.UpdateMaxNodeSkipEval(longest)
}

// Candidates counts the unneeded nodes of a group ("" for all), for the
// status ConfigMap.
func (s *ScaleDown) Candidates(group string) int {
	if s.last == nil {
		return 0
	}
	n := 0
	for _, c := range s.last.Unneeded {
		if group == "" || c.Group.Id() == group {
			n++
		}
	}
	return n
}

// Unremovable lists the last plan's unremovable nodes with their reasons
// (and the details of those that have some), sorted by name, at most limit
// of them.
func (s *ScaleDown) Unremovable(limit int) []clusterstate.UnremovableNode {
	if s.last == nil {
		return nil
	}
	out := make([]clusterstate.UnremovableNode, 0, len(s.last.Unremovable))
	for n, r := range s.last.Unremovable {
		out = append(out, clusterstate.UnremovableNode{Name: n, Reason: r, Detail: s.last.Details[n]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// MaxNodeSkipEval returns the longest time a node now left out of the
// scale-down simulation has gone without being evaluated, and whether
// --max-node-skip-eval-time-tracker-enabled is set (for the metric
// max_node_skip_eval_duration_seconds). Safe from any goroutine.
func (s *ScaleDown) MaxNodeSkipEval() (time.Duration, bool) { return s.planner.MaxNodeSkipEval() }

// Wait waits for drains in flight.
func (s *ScaleDown) Wait() { s.actuator.Wait() }

// UnneededNodes names the last plan's unneeded nodes (those scale-down will
// remove once their unneeded time has passed).
func (s *ScaleDown) UnneededNodes() map[string]bool {
	out := map[string]bool{}
	if s.last == nil {
		return out
	}
	for _, c := range s.last.Unneeded {
		out[c.Node.Name] = true
	}
	return out
}

// Removing names the nodes whose removal scale-down has started (or
// finished while their Node is still listed), so that the consolidation planner leaves them to it.
func (s *ScaleDown) Removing() map[string]bool {
	return s.actuator.Removing()
}
