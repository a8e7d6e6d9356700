package scaleup

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// Skipped node groups (--scaleup-simulation-for-skipped-node-groups-enabled):
// the pods a scale-up leaves are checked against the templates of the node
// groups skipped in the loop (backed off, not ready, ...), as upstream does
// since 851df332c3, so that the pods are not told "in backoff" by a group
// that would refuse them anyway. Reporting only: the decision is the same.

// skipRejection is a skipped node group whose template also refuses the
// pods of one pod group: the skip reason it no longer gives them, the
// scheduler's reasons it gives instead, and its verdict for the explainer.
type skipRejection struct {
	skip    string
	reasons []string
	verdict explain.NodeGroupVerdict
}

// simulateSkipped checks one pod of each of podGroups on a new node of the
// template of each skipped group of groups, and records in refused the
// skipped groups that refuse them. It returns the time it took.
func (o *Orchestrator) simulateSkipped(ctx context.Context, podGroups []*estimator.Group,
	groups map[string]*groupState, refused *refusals) time.Duration {
	start := o.clock.Now()
	exemplars := make([]*estimator.Group, len(podGroups))
	for i, g := range podGroups {
		exemplars[i] = &estimator.Group{Pods: g.Pods[:1], Interacting: g.Interacting}
	}
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		gs := groups[id]
		if gs.skip == "" || gs.template == nil || len(exemplars) == 0 {
			continue
		}
		// Room for one node per pod: no limit stops a pod short of its check.
		est, err := o.estimator.Estimate(ctx, exemplars, gs.template, id, estimator.Limits{MaxNodes: len(exemplars)})
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Simulating a skipped node group failed", "nodeGroup", id, "err", err)
			continue
		}
		for i, g := range podGroups {
			p := exemplars[i].Pods[0]
			if perr, ok := est.Unschedulable[p]; ok {
				refused.rejectSkipped(id, g, gs.skip, perr, p, gs.template.Node)
			} else {
				klog.FromContext(ctx).V(4).Info("Skipped node group would take the pods", "nodeGroup", id,
					"pod", klog.KObj(p), "skipped", gs.skip)
			}
		}
	}
	return o.clock.Since(start)
}

// rejectSkipped records that skipped node group id (skip: why it was
// skipped) also refuses the pods of g, err being the refusal of pod on a
// new node of template.
func (r *refusals) rejectSkipped(id string, g *estimator.Group, skip string, err error, pod *apiv1.Pod, template *apiv1.Node) {
	reasons := r.reasons(err, pod, template)
	v := explain.NodeGroupVerdict{NodeGroup: id, Cause: explain.CauseOther, Reason: strings.Join(reasons, ", "),
		Detail: "skipped in this loop (" + skip + "); its template refuses these pods too"}
	var u *framework.Unschedulable
	if errors.As(err, &u) {
		v.Cause, v.Plugin = explain.CauseScheduler, u.Plugin
	}
	if r.skipRejected == nil {
		r.skipRejected = map[*estimator.Group]map[string]skipRejection{}
	}
	if r.skipRejected[g] == nil {
		r.skipRejected[g] = map[string]skipRejection{}
	}
	r.skipRejected[g][id] = skipRejection{skip: skip, reasons: reasons, verdict: v}
}
