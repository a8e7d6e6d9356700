package scaleup

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// Reasons a node group gives for every pod, in the words of upstream's
// NotTriggerScaleUp events where upstream has words for them.
const (
	reasonBackoff        = "in backoff after failed scale-up"
	reasonUnhealthy      = "not ready for scale-up"
	reasonMaxSize        = "max node group size reached"
	reasonMaxNodesTotal  = "max total nodes in cluster reached"
	reasonNoTemplate     = "no template node to simulate with"
	reasonNoRefusalKnown = "it wouldn't fit if a new node is added"
	taintPlugin          = "TaintToleration"
	draPlugin            = "DynamicResources"
	// reasonNoDevices prefixes a DynamicResources refusal worded with the
	// devices the pod's claims ask for: "no node with 8 devices of class
	// gpu.example.com".
	reasonNoDevices = "no node with "
)

// refusals are why the node groups of one round of estimates took none of
// the pending pods: a reason a whole node group gives (skipped, at its max
// size, a cluster limit), or, for each pod equivalence group, the first
// refusal of the scheduler plugins on the node group's template node. Only
// the counts per reason are kept, so memory grows with the pod groups and
// their distinct reasons, not with the node groups.
type refusals struct {
	// whole counts the node groups per reason they give every pod.
	whole map[string]int
	// estimated is the number of node groups whose estimate placed no pod.
	estimated int
	// byPods counts, per pod group, those node groups per plugin reason;
	// refusedBy is how many of them the counts stand for.
	byPods    map[*estimator.Group]map[string]int
	refusedBy map[*estimator.Group]int
	// demands tells what a pod's resource claims ask for, to word the
	// DynamicResources plugin's refusals (nil: its own words are kept).
	demands func(*apiv1.Pod) []framework.DeviceDemand
	// verdicts and podVerdicts, kept only for the explainer (nil
	// otherwise), are each node group's refusal: of every pod, or of the
	// pods of one group.
	verdicts    map[string]explain.NodeGroupVerdict
	podVerdicts map[*estimator.Group]map[string]explain.NodeGroupVerdict
	// skipRejected are, per pod group, the skipped node groups whose
	// template refuses its pods too (simulateSkipped): they give those
	// pods the scheduler's reasons instead of their skip reason.
	skipRejected map[*estimator.Group]map[string]skipRejection
}

func newRefusals() *refusals {
	return &refusals{whole: map[string]int{}, byPods: map[*estimator.Group]map[string]int{},
		refusedBy: map[*estimator.Group]int{}}
}

// keepVerdicts makes r keep each node group's verdict for the explainer.
func (r *refusals) keepVerdicts() {
	r.verdicts = map[string]explain.NodeGroupVerdict{}
	r.podVerdicts = map[*estimator.Group]map[string]explain.NodeGroupVerdict{}
}

// estimateOf is estimate for node group id, whose verdict on each pod group
// is kept for the explainer: the first refusal of the group's pods, with
// the scheduler plugin that gave it.
func (r *refusals) estimateOf(id string, podGroups []*estimator.Group, est estimator.Estimate, template *apiv1.Node) {
	r.estimate(podGroups, est, template)
	r.keepPodVerdicts(id, podGroups, est, template)
}

// keepPodVerdicts keeps, when verdicts are kept, node group id's verdict on
// each of podGroups from its estimate.
func (r *refusals) keepPodVerdicts(id string, podGroups []*estimator.Group, est estimator.Estimate, template *apiv1.Node) {
	if r.podVerdicts == nil {
		return
	}
	for _, g := range podGroups {
		v := explain.NodeGroupVerdict{NodeGroup: id, Cause: explain.CauseOther, Reason: reasonNoRefusalKnown}
		for _, p := range g.Pods {
			err, ok := est.Unschedulable[p]
			if !ok {
				continue
			}
			v.Reason = strings.Join(r.reasons(err, p, template), ", ")
			var u *framework.Unschedulable
			if errors.As(err, &u) {
				v.Cause, v.Plugin = explain.CauseScheduler, u.Plugin
			}
			break
		}
		if r.podVerdicts[g] == nil {
			r.podVerdicts[g] = map[string]explain.NodeGroupVerdict{}
		}
		r.podVerdicts[g][id] = v
	}
}

// unplaced keeps, for the explainer, node group id's refusal of each pod
// group none of whose pods its estimate placed, when it placed others.
func (r *refusals) unplaced(id string, podGroups []*estimator.Group, est estimator.Estimate, template *apiv1.Node) {
	if r.podVerdicts == nil {
		return
	}
	placed := make(map[*apiv1.Pod]bool, len(est.Scheduled))
	for _, p := range est.Scheduled {
		placed[p] = true
	}
	var none []*estimator.Group
	for _, g := range podGroups {
		if len(g.Pods) > 0 && !placed[g.Pods[0]] {
			none = append(none, g)
		}
	}
	r.keepPodVerdicts(id, none, est, template)
}

// group records a reason a node group gives for every pod.
func (r *refusals) group(reason string) { r.whole[reason]++ }

// estimate records, for each pod group, the first refusal an estimate that
// placed no pod met among the group's pods; template is the node group's
// template node.
func (r *refusals) estimate(podGroups []*estimator.Group, est estimator.Estimate, template *apiv1.Node) {
	r.estimated++
	for _, g := range podGroups {
		for _, p := range g.Pods {
			err, ok := est.Unschedulable[p]
			if !ok {
				continue
			}
			counts := r.byPods[g]
			if counts == nil {
				counts = map[string]int{}
				r.byPods[g] = counts
			}
			for _, reason := range r.reasons(err, p, template) {
				counts[reason]++
			}
			r.refusedBy[g]++
			break
		}
	}
}

// reasons is refusalReasons with a refusal of the DynamicResources plugin
// on a node worded by the devices the pod's claims ask for, so that the
// event names the device class that did not fit. A refusal of the pod
// before any node is looked at (u.Node empty: a claim or template that
// cannot be read, admin access outside a labelled namespace) keeps its own
// words: no node's devices would change it.
func (r *refusals) reasons(err error, pod *apiv1.Pod, template *apiv1.Node) []string {
	return deviceReasons(r.demands, err, pod, template)
}

// deviceReasons is refusalReasons with a refusal of the DynamicResources
// plugin on a node worded by the devices pod's claims ask for (demands;
// nil keeps the plugin's own words): "no node with 8 devices of class
// gpu.example.com".
func deviceReasons(demands func(*apiv1.Pod) []framework.DeviceDemand, err error, pod *apiv1.Pod, template *apiv1.Node) []string {
	var u *framework.Unschedulable
	if demands != nil && errors.As(err, &u) && u.Plugin == draPlugin && u.Node != "" {
		if d := demands(pod); len(d) > 0 {
			return []string{reasonNoDevices + framework.DemandsString(d)}
		}
	}
	return refusalReasons(err, pod, template)
}

// refusalReasons turns a refusal into the reasons the event counts: the
// plugin's own words, with the taint named when a taint was not tolerated.
func refusalReasons(err error, pod *apiv1.Pod, template *apiv1.Node) []string {
	var u *framework.Unschedulable
	if !errors.As(err, &u) {
		return []string{err.Error()}
	}
	reasons := slices.Compact(slices.Sorted(slices.Values(u.Reasons)))
	if len(reasons) == 0 {
		return []string{fmt.Sprintf("rejected by the %s plugin", u.Plugin)}
	}
	if u.Plugin == taintPlugin && template != nil {
		taint, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), template.Spec.Taints,
			pod.Spec.Tolerations, func(t *apiv1.Taint) bool {
				return t.Effect == apiv1.TaintEffectNoSchedule || t.Effect == apiv1.TaintEffectNoExecute
			}, false)
		if found && len(reasons) == 1 {
			reasons[0] = fmt.Sprintf("%s (%s)", reasons[0], taint.ToString())
		}
	}
	return reasons
}

// message is what the pods of g are told: each reason with the number of
// node groups that gave it, sorted so that the same situation gives the
// same message every loop (and client-go can fold the repeats).
func (r *refusals) message(g *estimator.Group) string {
	counts := maps.Clone(r.whole)
	for reason, n := range r.byPods[g] {
		counts[reason] += n
	}
	for _, rej := range r.skipRejected[g] {
		if counts[rej.skip]--; counts[rej.skip] <= 0 {
			delete(counts, rej.skip)
		}
		for _, reason := range rej.reasons {
			counts[reason]++
		}
	}
	if unknown := r.estimated - r.refusedBy[g]; unknown > 0 {
		counts[reasonNoRefusalKnown] += unknown
	}
	if len(counts) == 0 {
		return "no node group"
	}
	if len(counts) == 1 && r.estimated == r.refusedBy[g] {
		for reason := range counts {
			if devices, ok := strings.CutPrefix(reason, reasonNoDevices); ok {
				return fmt.Sprintf("no node group offers %s on one node", devices)
			}
		}
	}
	parts := make([]string, 0, len(counts))
	for _, reason := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[reason], reason))
	}
	return strings.Join(parts, ", ")
}

// backoffReason words a backed off group, with the error code of the
// failure that backed it off when there is one.
func backoffReason(code string) string {
	if code == "" {
		return reasonBackoff
	}
	return fmt.Sprintf("%s (%s)", reasonBackoff, code)
}

// limitReason words a cluster limit an estimate ran into before it could
// add one node.
func (o *Orchestrator) limitReason(limit estimator.Limit) string {
	switch limit {
	case estimator.LimitCPU:
		return o.cpuLimitReason()
	case estimator.LimitMemory:
		return o.memoryLimitReason()
	case estimator.LimitMaxNodes:
		return fmt.Sprintf("%s (--max-nodes-total=%d)", reasonMaxNodesTotal, o.opts.MaxNodesTotal)
	case estimator.LimitTime:
		return "binpacking time budget (--max-nodegroup-binpacking-duration) used up"
	}
	return fmt.Sprintf("limited by %s", limit)
}

func (o *Orchestrator) cpuLimitReason() string {
	return fmt.Sprintf("max cluster cpu limit reached (--cores-total max %d)", o.opts.Cores.Max)
}

func (o *Orchestrator) memoryLimitReason() string {
	return fmt.Sprintf("max cluster memory limit reached (--memory-total max %dGiB)", o.opts.MemoryGiB.Max)
}

// exhaustedReason words the limit that leaves no room for one more node.
func (o *Orchestrator) exhaustedReason(l estimator.Limits) string {
	switch {
	case l.MaxMilliCPU < 0:
		return o.cpuLimitReason()
	case l.MaxMemoryBytes < 0:
		return o.memoryLimitReason()
	case o.opts.MaxNodesPerScaleUp <= 0:
		return "--max-nodes-per-scaleup allows no node"
	}
	return fmt.Sprintf("%s (--max-nodes-total=%d)", reasonMaxNodesTotal, o.opts.MaxNodesTotal)
}
