package disruption

import (
	"context"
	"math"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// Protections the voluntary reasons honour.
const (
	// DoNotDisrupt is Karpenter's annotation, on a node or on a pod, that
	// keeps the node from voluntary disruption; honoured so that users
	// migrating from Karpenter keep their protections.
	DoNotDisrupt = "karpenter.sh/do-not-disrupt"
	// SafeToEvict is upstream's pod annotation; "false" keeps the pod's
	// node.
	SafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// Budget says how many more nodes of node group group may start being
// disrupted now for reason, given the group's nodes (groupNodes, the
// autoscaled nodes the loop sees) and its nodes in flight for any reason
// (disrupting). The engine asks it for every reason but Unhealthy, whose
// budget is healing's breaker (--node-healing-max-unhealthy-percent) and
// --max-concurrent-heals. A candidate starts only when every group it
// takes nodes from allows all of them.
type Budget interface {
	Allowed(group string, reason Reason, groupNodes, disrupting int, now time.Time) int
}

// LoopBudget is a Budget that reads something once per loop (the node
// groups' own budgets, budget.PerGroup): the engine calls Refresh with the
// loop's time before it asks Allowed in that loop.
type LoopBudget interface {
	Budget
	Refresh(ctx context.Context, now time.Time)
}

// DefaultBudget is the budget when none is given: a voluntary reason may
// disrupt 10% of a group's nodes at once (rounded up, at least 1), less the
// group's nodes in flight; Interrupted is not held back (the instance goes
// anyway), nor are scale-down's reasons (DeleteOnly), which keep upstream's
// limits (--max-scale-down-parallelism, --max-drain-parallelism).
type DefaultBudget struct{}

// Allowed implements Budget.
func (DefaultBudget) Allowed(_ string, reason Reason, groupNodes, disrupting int, _ time.Time) int {
	if !voluntary(reason) || DeleteOnly(reason) {
		return math.MaxInt32
	}
	limit := max(1, (groupNodes+9)/10)
	return max(0, limit-disrupting)
}

// protected says whether node n is kept from the voluntary reasons, and
// why: upstream's scale-down-disabled annotation (when fresh: a node in
// flight carries the engine's own), Karpenter's do-not-disrupt on the node
// or one of its pods, a pod with safe-to-evict "false", a node younger than
// the settle time (not for MaxRunDuration: such a node is as old as the
// request's run limit at least, and the settle time would put its release
// off past what the request was told), or the Protected hook.
func (h *Engine) protected(n *apiv1.Node, loop *processors.Loop, fresh bool, reason Reason) (bool, string) {
	if fresh && n.Annotations[scaleDownDisabled] == "true" {
		return true, "the node carries " + scaleDownDisabled
	}
	if n.Annotations[DoNotDisrupt] == "true" {
		return true, "the node carries " + DoNotDisrupt
	}
	if fresh && reason != MaxRunDuration && h.opts.SettleTime > 0 && loop.Now.Sub(n.CreationTimestamp.Time) < h.opts.SettleTime {
		return true, "the node is younger than the settle time"
	}
	for _, p := range loop.ScheduledPods {
		if p.Spec.NodeName != n.Name || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed {
			continue
		}
		if p.Annotations[DoNotDisrupt] == "true" {
			return true, "pod " + p.Namespace + "/" + p.Name + " carries " + DoNotDisrupt
		}
		if p.Annotations[SafeToEvict] == "false" {
			return true, "pod " + p.Namespace + "/" + p.Name + " carries " + SafeToEvict + ": \"false\""
		}
	}
	if h.opts.Protected != nil {
		if ok, why := h.opts.Protected(n.Name); ok {
			return true, why
		}
	}
	return false, ""
}
