package scaledown

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Taints writes scale-down's taints on nodes.
type Taints struct {
	client kubernetes.Interface
	// maxSoft caps the DeletionCandidate taints written per loop
	// (--max-bulk-soft-taint-count; 0 turns them off).
	maxSoft int
	// cordon also marks nodes unschedulable when tainting them for deletion
	// (--cordon-node-before-terminating).
	cordon bool
	// softTime bounds the time spent writing and removing DeletionCandidate
	// taints per loop (--max-bulk-soft-taint-time), on clock.
	softTime time.Duration
	clock    clock.PassiveClock
	// readOnly: DeletionCandidate taints are read, never written or
	// removed (WithoutCandidateWrites).
	readOnly bool
}

// TaintsOption configures Taints.
type TaintsOption func(*Taints)

// WithSoftTaintTime bounds the time spent on DeletionCandidate taints per
// loop, measured on clk; without it the time is not bounded.
func WithSoftTaintTime(d time.Duration, clk clock.PassiveClock) TaintsOption {
	return func(t *Taints) { t.softTime, t.clock = d, clk }
}

// WithoutCandidateWrites keeps the DeletionCandidate taints as they are:
// the planner still reads their times, but UpdateCandidates writes and
// removes none (the explain command's simulated loop, which must not
// attempt a write).
func WithoutCandidateWrites() TaintsOption { return func(t *Taints) { t.readOnly = true } }

// NewTaints builds the taint writer.
func NewTaints(client kubernetes.Interface, maxSoft int, cordon bool, opts ...TaintsOption) *Taints {
	t := &Taints{client: client, maxSoft: maxSoft, cordon: cordon, softTime: math.MaxInt64, clock: clock.RealClock{}}
	for _, o := range opts {
		o(t)
	}
	return t
}

// update applies change to the node, retrying on conflicts.
func (t *Taints) update(ctx context.Context, name string, change func(*apiv1.Node) bool) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := t.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !change(n) {
			return nil
		}
		_, err = t.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func addTaint(n *apiv1.Node, taint apiv1.Taint) bool {
	for _, x := range n.Spec.Taints {
		if x.Key == taint.Key {
			return false
		}
	}
	n.Spec.Taints = append(n.Spec.Taints, taint)
	return true
}

func removeTaint(n *apiv1.Node, key string) bool {
	var kept []apiv1.Taint
	for _, x := range n.Spec.Taints {
		if x.Key != key {
			kept = append(kept, x)
		}
	}
	changed := len(kept) != len(n.Spec.Taints)
	n.Spec.Taints = kept
	return changed
}

// SoftEnabled reports whether DeletionCandidate taints are written at all
// (--max-bulk-soft-taint-count above 0).
func (t *Taints) SoftEnabled() bool { return t.maxSoft > 0 }

// UpdateCandidates removes the DeletionCandidate taint from the nodes in
// unmark (nodes needed again) and puts it, valued with the time each node
// became unneeded (c.Since), on the candidates in mark; the value keeps the
// unneeded timer across restarts and leader changes. Removals go first;
// both share one budget of --max-bulk-soft-taint-count nodes and
// --max-bulk-soft-taint-time per loop, and what does not fit waits for a
// later loop. With soft taints off, every taint in unmark is removed.
func (t *Taints) UpdateCandidates(ctx context.Context, mark []*Candidate, unmark []*apiv1.Node) {
	logger := klog.FromContext(ctx)
	if t.readOnly {
		return
	}
	if !t.SoftEnabled() {
		for _, n := range unmark {
			t.unmarkCandidate(ctx, n.Name)
		}
		return
	}
	start, left := t.clock.Now(), t.maxSoft
	within := func() bool { return left > 0 && t.clock.Since(start) < t.softTime }
	done := 0
	for _, n := range unmark {
		if !within() {
			break
		}
		t.unmarkCandidate(ctx, n.Name)
		left--
		done++
	}
	unmarked := done
	for _, c := range mark {
		if !within() {
			break
		}
		taint := apiv1.Taint{Key: DeletionCandidateTaint, Value: strconv.FormatInt(c.Since.Unix(), 10),
			Effect: apiv1.TaintEffectPreferNoSchedule}
		if err := t.update(ctx, c.Node.Name, func(n *apiv1.Node) bool { return setTaint(n, taint) }); err != nil &&
			!apierrors.IsNotFound(err) {
			logger.Error(err, "Marking a node as a deletion candidate", "node", c.Node.Name)
		}
		left--
		done++
	}
	if waiting := len(mark) + len(unmark) - done; waiting > 0 {
		logger.V(2).Info("Deletion-candidate taints left for a later loop (--max-bulk-soft-taint-count, --max-bulk-soft-taint-time)",
			"waiting", waiting, "removed", unmarked, "written", done-unmarked)
	}
}

func (t *Taints) unmarkCandidate(ctx context.Context, name string) {
	if err := t.update(ctx, name, func(n *apiv1.Node) bool { return removeTaint(n, DeletionCandidateTaint) }); err != nil &&
		!apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "Removing the deletion-candidate taint", "node", name)
	}
}

// setTaint adds taint, or gives an existing taint of its key its value and
// effect.
func setTaint(n *apiv1.Node, taint apiv1.Taint) bool {
	for i, x := range n.Spec.Taints {
		if x.Key == taint.Key {
			if x.Value == taint.Value && x.Effect == taint.Effect {
				return false
			}
			n.Spec.Taints[i] = taint
			return true
		}
	}
	n.Spec.Taints = append(n.Spec.Taints, taint)
	return true
}

// MarkToBeDeleted puts the NoSchedule ToBeDeleted taint (valued with now)
// on the node, and cordons it when configured, so nothing new lands there.
func (t *Taints) MarkToBeDeleted(ctx context.Context, name string, now time.Time) error {
	taint := apiv1.Taint{Key: ToBeDeletedTaint, Value: strconv.FormatInt(now.Unix(), 10), Effect: apiv1.TaintEffectNoSchedule}
	taken := false
	err := t.update(ctx, name, func(n *apiv1.Node) bool {
		// Read fresh: the engine may have taken the node since the plan's
		// observation (in this very loop); both writes check the other's
		// mark on the Node they update, so one of them wins.
		if taken = hasTaint(n, disruptionTaint); taken {
			return false
		}
		changed := addTaint(n, taint)
		if t.cordon && !n.Spec.Unschedulable {
			n.Spec.Unschedulable = true
			changed = true
		}
		return changed
	})
	if err != nil {
		return fmt.Errorf("tainting node %s for deletion: %w", name, err)
	}
	if taken {
		return fmt.Errorf("node %s: %w", name, ErrTakenByDisruption)
	}
	return nil
}

// disruptionTaint is the disruption engine's taint (disruption.Taint; a test
// keeps the two equal): a node carrying it is the engine's to remove.
const disruptionTaint = "cluster-autoscaler.kubernetes.io/healing"

// ErrTakenByDisruption: MarkToBeDeleted found the node taken by the
// disruption engine; scale-down leaves it alone.
var ErrTakenByDisruption = errors.New("the disruption engine is replacing or removing the node")

// UnmarkToBeDeleted undoes MarkToBeDeleted after a failed removal.
func (t *Taints) UnmarkToBeDeleted(ctx context.Context, name string) error {
	err := t.update(ctx, name, func(n *apiv1.Node) bool {
		changed := removeTaint(n, ToBeDeletedTaint)
		if t.cordon && n.Spec.Unschedulable {
			n.Spec.Unschedulable = false
			changed = true
		}
		return changed
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the deletion taint of node %s: %w", name, err)
	}
	return nil
}

// CleanUp removes the ToBeDeleted taints a previous autoscaler left on the
// given nodes (at start-up: its drains were cut short), and records
// upstream's ClusterAutoscalerCleanup event on each node (recorder may be
// nil).
func (t *Taints) CleanUp(ctx context.Context, nodes []*apiv1.Node, recorder record.EventRecorder) int {
	cleaned := 0
	for _, n := range nodes {
		if !hasTaint(n, ToBeDeletedTaint) {
			continue
		}
		if err := t.UnmarkToBeDeleted(ctx, n.Name); err != nil {
			klog.FromContext(ctx).Error(err, "Cleaning up a deletion taint left by a previous run", "node", n.Name)
			if recorder != nil {
				recorder.Eventf(n, apiv1.EventTypeWarning, "ClusterAutoscalerCleanup",
					"failed to clean %s on node %s: %v", ToBeDeletedTaint, n.Name, err)
			}
			continue
		}
		cleaned++
		klog.FromContext(ctx).Info("Removed a deletion taint left by a previous run", "node", n.Name)
		if recorder != nil {
			recorder.Eventf(n, apiv1.EventTypeNormal, "ClusterAutoscalerCleanup", "removed %s taint from node %s", ToBeDeletedTaint, n.Name)
		}
	}
	return cleaned
}

// LeftToBeDeleted picks, among nodes, those of the provider's node groups
// whose ToBeDeleted taint a previous run left, for CleanUp at start-up. A
// node whose instance the provider reports as being deleted keeps its
// taint: the previous run's deletion reached the cloud, the node goes, and
// lifting the taint would let pods land on it meanwhile.
func LeftToBeDeleted(ctx context.Context, provider cloudprovider.CloudProvider, nodes []*apiv1.Node) []*apiv1.Node {
	logger := klog.FromContext(ctx)
	var tainted []*apiv1.Node
	groupOf := map[string]string{}
	listed := map[string][]cloudprovider.Instance{}
	for _, n := range nodes {
		if !hasTaint(n, ToBeDeletedTaint) {
			continue
		}
		ng, err := provider.NodeGroupForNode(ctx, n)
		if err != nil || ng == nil {
			continue // not ours to clean
		}
		tainted = append(tainted, n)
		groupOf[n.Name] = ng.Id()
		if _, seen := listed[ng.Id()]; !seen {
			instances, err := ng.Nodes(ctx)
			if err != nil {
				logger.Error(err, "Listing a node group's instances at start-up; its nodes' deletion taints are lifted", "nodeGroup", ng.Id())
			}
			listed[ng.Id()] = instances
		}
	}
	deleting := map[string]bool{}
	for _, instances := range listed {
		for _, in := range instances {
			if in.Status != nil && in.Status.State == cloudprovider.InstanceDeleting {
				deleting[in.Id] = true
			}
		}
	}
	// The node's instance as its provider matches it; a node that only
	// may be an instance being deleted keeps its taint as well.
	identities := cloudprovider.Identify(ctx, provider, tainted, listed)
	var out []*apiv1.Node
	for _, n := range tainted {
		if id, m := identities.MayBeListed(n.Name); m != cloudprovider.NoMatch && deleting[id] {
			logger.Info("Keeping the deletion taint a previous run left on a node its cloud provider is deleting", "node", n.Name,
				"nodeGroup", groupOf[n.Name], "instance", id, "match", m)
			continue
		}
		out = append(out, n)
	}
	return out
}
