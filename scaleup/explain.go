package scaleup

import (
	"fmt"
	"strings"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
)

// WithExplainer records, in every scale-up, each node group's verdict on
// each pending pod group for the explainer (/explainz).
func WithExplainer(r *explain.Recorder) Option { return func(o *Orchestrator) { o.explain = r } }

// refuse records that node group id refuses every pod: the reason for the
// event, and the verdict with its cause and numbers for the explainer.
func (r *refusals) refuse(id string, v explain.NodeGroupVerdict) {
	r.group(v.Reason)
	if r.verdicts != nil {
		v.NodeGroup = id
		r.verdicts[id] = v
	}
}

// skipVerdict is the verdict of a group skipped for the whole loop
// (groupState.skip), with its cause and, for a back-off, its error and end.
func skipVerdict(gs *groupState) explain.NodeGroupVerdict {
	v := explain.NodeGroupVerdict{Reason: gs.skip, Cause: explain.CauseOther}
	switch {
	case strings.HasPrefix(gs.skip, reasonBackoff):
		v.Cause, v.Detail = explain.CauseBackoff, gs.backoffMessage
		if !gs.backoffUntil.IsZero() {
			until := gs.backoffUntil
			v.Until = &until
		}
	case gs.skip == reasonUnhealthy:
		v.Cause = explain.CauseUnhealthy
	case gs.skip == reasonNoTemplate || strings.HasPrefix(gs.skip, "template"):
		v.Cause = explain.CauseNoTemplate
	case gs.excluded:
		v.Cause = explain.CauseExcluded
	}
	return v
}

// limitVerdict is the verdict of a group an estimate limit or an exhausted
// cluster limit refused, with the cluster's numbers.
func (o *Orchestrator) limitVerdict(reason string, t *totals) explain.NodeGroupVerdict {
	v := explain.NodeGroupVerdict{Reason: reason, Cause: explain.CauseResourceLimit}
	switch {
	case strings.Contains(reason, "binpacking"), strings.Contains(reason, "--max-nodes-per-scaleup"):
		v.Cause = explain.CauseOther
	case strings.HasPrefix(reason, reasonMaxNodesTotal):
		v.Cause = explain.CauseMaxNodesTotal
		v.Detail = fmt.Sprintf("the cluster has %d nodes, upcoming ones included; --max-nodes-total=%d", t.nodes, o.opts.MaxNodesTotal)
	}
	return v
}

// recordFitting records the pods that fit existing or upcoming nodes.
func (o *Orchestrator) recordFitting(pending, remaining []*apiv1.Pod) {
	if o.explain == nil || len(pending) == len(remaining) {
		return
	}
	left := make(map[*apiv1.Pod]bool, len(remaining))
	for _, p := range remaining {
		left[p] = true
	}
	var fit []*apiv1.Pod
	for _, p := range pending {
		if !left[p] {
			fit = append(fit, p)
		}
	}
	upcoming := o.upcomingOf(fit)
	for _, g := range estimator.GroupPods(fit) {
		names, req := explain.PodNames(g.Pods)
		o.explain.AddPodGroup(explain.PodGroup{Pods: names, PodCount: len(g.Pods), Request: req,
			Outcome: explain.OutcomeFitsExisting, WaitsFor: upcoming[g.Representative()]})
	}
}

// upcomingOf tells, of pods placed on the snapshot, those placed on an
// upcoming node, with that node's group.
func (o *Orchestrator) upcomingOf(pods []*apiv1.Pod) map[*apiv1.Pod]string {
	// The snapshot may hold copies of the pods placed by counting: they
	// are known by namespace and name.
	want := make(map[string]*apiv1.Pod, len(pods))
	for _, p := range pods {
		want[p.Namespace+"/"+p.Name] = p
	}
	out := map[*apiv1.Pod]string{}
	snap := o.sim.Snapshot()
	for _, node := range snap.NodeNames() {
		if !strings.HasPrefix(node, upcomingPrefix) {
			continue
		}
		placed, err := snap.Pods(node)
		if err != nil {
			continue
		}
		group := strings.TrimPrefix(node, upcomingPrefix)
		if i := strings.LastIndex(group, "-"); i > 0 {
			group = group[:i]
		}
		for _, p := range placed {
			if orig, ok := want[p.Namespace+"/"+p.Name]; ok {
				out[orig] = group
			}
		}
	}
	return out
}

// recordRound records, for each pod group of one round of estimates, each
// node group's verdict: the options that took some of its pods (best
// chosen, when the expander chose one), and the refusals. served are the
// pods the round's increases are for; message is what pods left are told.
func (o *Orchestrator) recordRound(podGroups []*estimator.Group, options []expander.Option, best *expander.Option,
	refused *refusals, served []*apiv1.Pod, message func(*estimator.Group) string) {
	if o.explain == nil {
		return
	}
	isServed := make(map[*apiv1.Pod]bool, len(served))
	for _, p := range served {
		isServed[p] = true
	}
	for _, g := range podGroups {
		names, req := explain.PodNames(g.Pods)
		rec := explain.PodGroup{Pods: names, PodCount: len(g.Pods), Request: req, Outcome: explain.OutcomeNoScaleUp}
		mine := make(map[*apiv1.Pod]bool, len(g.Pods))
		for _, p := range g.Pods {
			mine[p] = true
		}
		seen := map[string]bool{}
		for _, opt := range options {
			n := 0
			for _, p := range opt.Pods {
				if mine[p] {
					n++
				}
			}
			id := opt.NodeGroup.Id()
			seen[id] = true
			if n == 0 {
				v, ok := refused.podVerdicts[g][id]
				if !ok {
					v = explain.NodeGroupVerdict{NodeGroup: id, Cause: explain.CauseOther,
						Reason: "its estimate placed none of these pods (other pods took its nodes)"}
				}
				rec.NodeGroups = append(rec.NodeGroups, v)
				continue
			}
			v := explain.NodeGroupVerdict{NodeGroup: id, Fits: true, Nodes: opt.NodeCount, Pods: n}
			if best != nil && best.NodeGroup.Id() == id {
				v.Chosen = true
				v.Why = fmt.Sprintf("chosen by --expander=%s among %d option(s)", strings.Join(o.opts.Expanders, ","), len(options))
			}
			rec.NodeGroups = append(rec.NodeGroups, v)
		}
		for id, v := range refused.verdicts {
			if !seen[id] {
				seen[id] = true
				if rej, ok := refused.skipRejected[g][id]; ok {
					v = rej.verdict
				}
				rec.NodeGroups = append(rec.NodeGroups, v)
			}
		}
		for id, v := range refused.podVerdicts[g] {
			if !seen[id] {
				seen[id] = true
				rec.NodeGroups = append(rec.NodeGroups, v)
			}
		}
		switch {
		case len(g.Pods) > 0 && isServed[g.Pods[0]]:
			rec.Outcome = explain.OutcomeScaledUp
			if best != nil {
				rec.Message = fmt.Sprintf("node group %s chosen (%s)", best.NodeGroup.Id(), best.Debug)
			}
		case len(options) == 0 || best == nil:
			rec.Message = "pod didn't trigger scale-up: " + message(g)
		default:
			rec.Message = "not served by this round's increase; estimated again"
		}
		o.explain.AddPodGroup(rec)
	}
}

// recordAll records the verdict of an all-or-nothing scale-up for its pods:
// the groups of the plan, or the reason there is none.
func (o *Orchestrator) recordAll(pods []*apiv1.Pod, plan []share, reason string) {
	if o.explain == nil {
		return
	}
	names, req := explain.PodNames(pods)
	rec := explain.PodGroup{Pods: names, PodCount: len(pods), Request: req, Outcome: explain.OutcomeNoScaleUp,
		Message: reason}
	if plan != nil {
		rec.Outcome, rec.Message = explain.OutcomeScaledUp, "all-or-nothing scale-up planned"
		for _, sh := range plan {
			rec.NodeGroups = append(rec.NodeGroups, explain.NodeGroupVerdict{NodeGroup: sh.gs.group.Id(), Fits: true,
				Nodes: sh.delta, Pods: len(pods), Chosen: true, Why: "part of the all-or-nothing plan"})
		}
	}
	o.explain.AddPodGroup(rec)
}
