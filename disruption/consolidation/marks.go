package consolidation

import (
	"context"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/taints"
)

// Marks keeps the PreferNoSchedule taint taints.ConsolidationCandidate on
// exactly the nodes of the current plan. The engine disrupts a plan's nodes
// a budget's worth at a time; without the mark kube-scheduler sends the pods
// evicted from the first ones to the emptiest nodes, which are often the
// plan's later ones, and those pods are evicted a second time (the
// consolidation benchmark counted 157 of 501 evictions so). With it the
// scheduler prefers the nodes that stay, as the plan's simulation placed
// them. The mark only steers scoring: a pod that fits nowhere else still
// lands on a marked node.
type Marks struct {
	client kubernetes.Interface
	// max caps the nodes written per loop (marked and unmarked together);
	// the rest wait for a later loop.
	max int
	// removeOnly: marks are removed, never put (soft taints turned off).
	removeOnly bool
}

// NewMarks builds the writer; perLoop below 1 writes one node per loop.
// With removeOnly, Update only removes marks (the operator turned
// PreferNoSchedule taints off, or consolidation, and a run before left some).
func NewMarks(client kubernetes.Interface, perLoop int, removeOnly bool) *Marks {
	return &Marks{client: client, max: max(perLoop, 1), removeOnly: removeOnly}
}

// Update removes the mark from the nodes of nodes that carry it and are not
// in want, then puts it on the nodes of want that lack it, removals first,
// at most the cap of writes in all. nodes is the loop's observation; a name
// of want that is not among them is ignored (the node is gone). A cordoned
// node of want is not marked: no pod is scheduled there anyway (a plan's
// nodes being drained are cordoned), and its write would take the place of
// one that steers.
func (m *Marks) Update(ctx context.Context, nodes []*apiv1.Node, want map[string]bool) {
	if m == nil {
		return
	}
	if m.removeOnly {
		want = nil
	}
	var unmark, mark []string
	for _, n := range nodes {
		has := hasTaint(n, taints.ConsolidationCandidate)
		switch {
		case has && !want[n.Name]:
			unmark = append(unmark, n.Name)
		case !has && want[n.Name] && !n.Spec.Unschedulable:
			mark = append(mark, n.Name)
		}
	}
	sort.Strings(unmark)
	sort.Strings(mark)
	logger := klog.FromContext(ctx)
	left := m.max
	for _, name := range unmark {
		if left == 0 {
			break
		}
		left--
		if err := m.update(ctx, name, false); err != nil {
			logger.Error(err, "Removing the consolidation-candidate taint", "node", name)
		}
	}
	for _, name := range mark {
		if left == 0 {
			break
		}
		left--
		if err := m.update(ctx, name, true); err != nil {
			logger.Error(err, "Putting the consolidation-candidate taint", "node", name)
		}
	}
	if waiting := len(unmark) + len(mark) - (m.max - left); waiting > 0 {
		logger.V(2).Info("Consolidation-candidate taints left for a later loop", "waiting", waiting)
	}
}

// update puts (on) or removes the mark on the node as read now, retrying on
// conflicts; a node that is gone needs nothing.
func (m *Marks) update(ctx context.Context, name string, on bool) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := m.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hasTaint(n, taints.ConsolidationCandidate) == on {
			return nil
		}
		n = n.DeepCopy()
		if on {
			n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: taints.ConsolidationCandidate,
				Effect: apiv1.TaintEffectPreferNoSchedule})
		} else {
			kept := n.Spec.Taints[:0:0]
			for _, t := range n.Spec.Taints {
				if t.Key != taints.ConsolidationCandidate {
					kept = append(kept, t)
				}
			}
			n.Spec.Taints = kept
		}
		_, err = m.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// MarkedNodes names the nodes of a plan's candidates, those the engine will
// disrupt now and those waiting for its budget alike.
func MarkedNodes(cands []disruption.Candidate) map[string]bool {
	out := map[string]bool{}
	for _, c := range cands {
		for _, n := range c.Nodes {
			out[n] = true
		}
	}
	return out
}
