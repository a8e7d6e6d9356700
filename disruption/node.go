package disruption

import (
	"context"
	"errors"
	"fmt"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// OutOfServiceTaint is Kubernetes' taint for a node that is shut down and
// will not come back (non-graceful node shutdown): the pod garbage collector
// then removes the pods still bound to it. A heal puts it only on a node
// whose instance its group no longer lists.
const OutOfServiceTaint = "node.kubernetes.io/out-of-service"

// group returns the node's group; an error is the provider's (transient:
// retried), a nil group with no error means the node is not autoscaled.
func (h *Engine) group(ctx context.Context, n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	g, err := h.provider.NodeGroupForNode(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("looking up the node group of node %s: %w", n.Name, err)
	}
	return g, nil
}

// groupByID returns the group named id; nil with no error when the
// provider no longer has it.
func (h *Engine) groupByID(ctx context.Context, id string) (cloudprovider.NodeGroup, error) {
	groups, err := h.provider.NodeGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the node groups: %w", err)
	}
	for _, g := range groups {
		if g.Id() == id {
			return g, nil
		}
	}
	return nil, nil
}

// instanceGone reports whether the instance of a plan's node is gone, as positively
// as its provider can say so: the group no longer lists the instance the
// heal deleted (r.Instance, or the Node's provider ID in older records),
// no group lists an instance that the Node is or may be as the provider
// matches Nodes to instances (cloudprovider.Identify: the same matching that
// found the node's group, a Machine's nodeRef included), and the provider
// does not say the Node still has an instance. Whatever cannot be told (an
// error, the group gone from the listing) counts as still there: why says
// what is still seen.
func (h *Engine) instanceGone(ctx context.Context, r *member, node *apiv1.Node) (gone bool, why string, err error) {
	g, err := h.groupByID(ctx, r.Group)
	if err != nil || g == nil {
		if err == nil {
			err = fmt.Errorf("node group %s is no longer listed, so whether its instance is gone cannot be told", r.Group)
		}
		return false, "", err
	}
	instances, err := g.Nodes(ctx)
	if err != nil {
		return false, "", fmt.Errorf("listing the instances of %s: %w", r.Group, err)
	}
	for _, recorded := range []string{r.Instance, r.ProviderID} {
		if recorded == "" {
			continue
		}
		for _, in := range instances {
			if in.Id == recorded || cloudprovider.NormalizeProviderID(in.Id) == cloudprovider.NormalizeProviderID(recorded) {
				return false, "its group still lists instance " + in.Id, nil
			}
		}
	}
	if node == nil {
		return true, "", nil
	}
	groups, err := h.provider.NodeGroups(ctx)
	if err != nil {
		return false, "", fmt.Errorf("listing the node groups: %w", err)
	}
	listed := make(map[string][]cloudprovider.Instance, len(groups))
	for _, ng := range groups {
		if listed[ng.Id()], err = ng.Nodes(ctx); err != nil {
			return false, "", fmt.Errorf("listing the instances of %s: %w", ng.Id(), err)
		}
	}
	ids := cloudprovider.Identify(ctx, h.provider, []*apiv1.Node{node}, listed)
	switch id, m := ids.MayBeListed(node.Name); m {
	case cloudprovider.SureMatch:
		return false, "the node is still instance " + id, nil
	case cloudprovider.MaybeMatch:
		return false, fmt.Sprintf("the node may still be an instance (%s%s)", id, whyPrefix(ids.Why(node.Name))), nil
	}
	has, err := h.provider.HasInstance(ctx, node)
	switch {
	case err == nil && has:
		return false, "its provider says the node still has an instance", nil
	case err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented):
		return false, "", fmt.Errorf("asking the provider whether node %s has an instance: %w", node.Name, err)
	}
	return true, "", nil
}

func whyPrefix(why string) string {
	if why == "" {
		return ""
	}
	return "; " + why
}

// instanceOfNode is the id, as group g lists it, of node's instance when
// its provider names it for sure ("" otherwise).
func (h *Engine) instanceOfNode(ctx context.Context, g cloudprovider.NodeGroup, node *apiv1.Node) string {
	instances, err := g.Nodes(ctx)
	if err != nil {
		return ""
	}
	ids := cloudprovider.Identify(ctx, h.provider, []*apiv1.Node{node}, map[string][]cloudprovider.Instance{g.Id(): instances})
	id, _ := ids.InstanceOf(node.Name)
	return id
}

// snapshotBefore records what cordon will change on n.
func snapshotBefore(n *apiv1.Node) *nodeBefore {
	b := &nodeBefore{Unschedulable: n.Spec.Unschedulable}
	if v, ok := n.Annotations[scaleDownDisabled]; ok {
		b.ScaleDownDisabled = &v
	}
	return b
}

// ScaleDownTaint is scale-down's taint on a node it is removing (upstream's
// ToBeDeletedByClusterAutoscaler).
const ScaleDownTaint = "ToBeDeletedByClusterAutoscaler"

// errScaleDownRemoving: the node carries ScaleDownTaint as read just
// before the cordon; the engine leaves it to scale-down.
var errScaleDownRemoving = errors.New("scale-down is removing the node")

// scaleDownRemovingError is the cordon's refusal of a node scale-down took;
// ours says whether the node carried the engine's own taint as well (an
// earlier cordon of the plan).
type scaleDownRemovingError struct {
	node string
	ours bool
}

func (e *scaleDownRemovingError) Error() string {
	return fmt.Sprintf("node %s carries %s: %v", e.node, ScaleDownTaint, errScaleDownRemoving)
}

func (e *scaleDownRemovingError) Unwrap() error { return errScaleDownRemoving }

// cordon marks a node being healed: unschedulable, the healing taint, and
// scale-down kept off it. The node's taints are those read just before the
// write (the same read-then-update, retried on conflicts): a node scale-down
// tainted ToBeDeletedByClusterAutoscaler in the meantime is refused with a
// *scaleDownRemovingError and left as it is. Scale-down runs before the
// engine in a loop and checks the engine's taint before it writes its own,
// so this is the engine's half of that exclusion, not left to the order.
func (h *Engine) cordon(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := h.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hasTaintKey(n, ScaleDownTaint) {
			return &scaleDownRemovingError{node: name, ours: hasTaintKey(n, Taint)}
		}
		n.Spec.Unschedulable = true
		n.Spec.Taints = append(withoutTaint(n.Spec.Taints, Taint),
			apiv1.Taint{Key: Taint, Value: "true", Effect: apiv1.TaintEffectNoSchedule})
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[scaleDownDisabled] = healScaleDownDisabled
		_, err = h.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// yieldToScaleDown ends a plan whose cordon found a node scale-down is
// removing (err, a *scaleDownRemovingError): its nodes are given back
// (PhaseRestoring), except that the refused node, unless the plan had
// cordoned it already, keeps whatever it has: the state recorded before
// may be older than scale-down's own cordon, which giving it back would
// undo on a node being removed.
func (s *step) yieldToScaleDown(err error) bool {
	var refused *scaleDownRemovingError
	if !errors.As(err, &refused) {
		return false
	}
	for _, m := range s.r.Nodes {
		if m.Node == refused.node && !refused.ours {
			m.Before = nil
		}
	}
	s.logger.Info("Scale-down is removing a node of the disruption: it is left to scale-down, the disruption ends",
		"refusedNode", refused.node)
	s.end("cancelled", "ScaleDownRemoving", fmt.Sprintf("node %s carries %s (scale-down is removing it) as read before "+
		"its cordon; the disruption leaves it to scale-down and gives the nodes back; nothing was removed", refused.node, ScaleDownTaint))
	return true
}

// restore gives a node whose heal ended without removing it back its own
// state: the healing taint goes; unschedulable and the scale-down-disabled
// annotation are put back as recorded before the heal, but only where the
// node still holds what the heal wrote (unschedulable true, the annotation
// healScaleDownDisabled): an operator who uncordoned the node, or changed or
// removed the annotation, while the heal ran keeps that. A node the heal
// never cordoned only loses the taint, should it carry one. A node already
// gone needs nothing.
func (h *Engine) restore(ctx context.Context, r *member) error {
	err := h.updateNode(ctx, r.Node, func(n *apiv1.Node) {
		n.Spec.Taints = withoutTaint(n.Spec.Taints, Taint)
		b := r.Before
		if b == nil {
			return
		}
		if n.Spec.Unschedulable {
			n.Spec.Unschedulable = b.Unschedulable
		}
		if v, ok := n.Annotations[scaleDownDisabled]; !ok || v != healScaleDownDisabled {
			return
		}
		if b.ScaleDownDisabled != nil {
			n.Annotations[scaleDownDisabled] = *b.ScaleDownDisabled
		} else {
			delete(n.Annotations, scaleDownDisabled)
		}
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// markOutOfService puts Kubernetes' out-of-service taint on a node whose
// instance is gone.
func (h *Engine) markOutOfService(ctx context.Context, name string) error {
	err := h.updateNode(ctx, name, func(n *apiv1.Node) {
		n.Spec.Taints = append(withoutTaint(n.Spec.Taints, OutOfServiceTaint),
			apiv1.Taint{Key: OutOfServiceTaint, Value: "nodeshutdown", Effect: apiv1.TaintEffectNoExecute})
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// updateNode applies change to the node as read now, retrying on conflicts.
func (h *Engine) updateNode(ctx context.Context, name string, change func(*apiv1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := h.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = h.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func withoutTaint(taints []apiv1.Taint, key string) []apiv1.Taint {
	var out []apiv1.Taint
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}

// evict asks the Eviction API to evict the node's pods (PDBs honoured; a
// refusal is retried in the next loop) and returns how many are left. It
// never deletes a pod: the pods of a node that is not Ready may still run
// there, and are cleared only once its instance is gone (PhaseFencing).
func (h *Engine) evict(ctx context.Context, node *apiv1.Node, loop *processors.Loop) int {
	logger := klog.FromContext(ctx)
	left := 0
	for _, p := range loop.ScheduledPods {
		if p.Spec.NodeName != node.Name || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed ||
			isDaemonSetPod(p) || p.Annotations[apiv1.MirrorPodAnnotationKey] != "" {
			continue
		}
		left++
		if p.DeletionTimestamp != nil {
			continue
		}
		err := h.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			logger.V(2).Info("Eviction refused (disruption budget); retrying in the next loop", "pod", klog.KObj(p))
		default:
			logger.Error(err, "Evicting a pod of a node being healed", "pod", klog.KObj(p))
		}
	}
	return left
}

// readyCount counts, per node group, the Ready nodes (as the cluster state
// judges them: notReadyYet), the nodes of exclude and the nodes being
// disrupted (tainted) aside.
func (h *Engine) readyCount(ctx context.Context, loop *processors.Loop, exclude map[string]bool) map[string]int {
	ready := map[string]int{}
	for _, n := range loop.Nodes {
		if exclude[n.Name] || !nodeReady(n) || hasTaintKey(n, Taint) {
			continue
		}
		if g, err := h.provider.NodeGroupForNode(ctx, n); err == nil && g != nil && !h.notReadyYet(g.Id(), n) {
			ready[g.Id()]++
		}
	}
	return ready
}

// replacementsReady reports whether every replacement of r is Ready: a
// heal's when its group counts more Ready nodes than when it started; any
// other plan's when its new nodes are Ready (assignReplacements).
func (h *Engine) replacementsReady(ctx context.Context, r *plan, loop *processors.Loop) bool {
	if len(r.Replacements) == 0 {
		return true
	}
	exclude := map[string]bool{}
	for _, m := range r.Nodes {
		exclude[m.Node] = true
	}
	var ready map[string]int
	for _, rp := range r.Replacements {
		if rp.Known != nil {
			if h.assigned[rp] < rp.Count {
				return false
			}
			continue
		}
		if ready == nil {
			ready = h.readyCount(ctx, loop, exclude)
		}
		if ready[rp.Group] < rp.ReadyBefore+max(1, rp.Count) {
			return false
		}
	}
	return true
}

// groupNodeNames names the loop's nodes of group id.
func (h *Engine) groupNodeNames(ctx context.Context, loop *processors.Loop, id string) []string {
	out := []string{}
	for _, n := range loop.Nodes {
		if g, err := h.provider.NodeGroupForNode(ctx, n); err == nil && g != nil && g.Id() == id {
			out = append(out, n.Name)
		}
	}
	return out
}

// assignReplacements hands the Ready nodes (notReadyYet: started, their
// devices published) that are new to a group (not Known when a plan asked
// for its replacement, not being disrupted) to the plans that asked for
// them, the oldest plan first, each node to one plan; it returns how many
// each replacement has.
func (h *Engine) assignReplacements(ctx context.Context, st *state, loop *processors.Loop) map[*replacement]int {
	out := map[*replacement]int{}
	var plans []*plan
	members := map[string]bool{}
	for _, r := range st.Heals {
		for _, m := range r.Nodes {
			members[m.Node] = true
		}
		for _, rp := range r.Replacements {
			if rp.Known != nil && rp.Increased {
				plans = append(plans, r)
				break
			}
		}
	}
	if len(plans) == 0 {
		return out
	}
	sort.Slice(plans, func(i, j int) bool {
		if !plans[i].Started.Equal(plans[j].Started) {
			return plans[i].Started.Before(plans[j].Started)
		}
		return plans[i].Node < plans[j].Node
	})
	ready := map[string][]string{}
	for _, n := range loop.Nodes {
		if members[n.Name] || !nodeReady(n) || hasTaintKey(n, Taint) || n.DeletionTimestamp != nil {
			continue
		}
		if g, err := h.provider.NodeGroupForNode(ctx, n); err == nil && g != nil && !h.notReadyYet(g.Id(), n) {
			ready[g.Id()] = append(ready[g.Id()], n.Name)
		}
	}
	taken := map[string]bool{}
	for _, r := range plans {
		for _, rp := range r.Replacements {
			if rp.Known == nil || !rp.Increased {
				continue
			}
			known := map[string]bool{}
			for _, n := range rp.Known {
				known[n] = true
			}
			for _, n := range ready[rp.Group] {
				if out[rp] >= rp.Count {
					break
				}
				if !known[n] && !taken[n] {
					taken[n] = true
					out[rp]++
				}
			}
		}
	}
	return out
}

func nodeReady(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

func hasTaintKey(n *apiv1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func isControlPlane(n *apiv1.Node) bool {
	_, ok := n.Labels[ControlPlaneLabel]
	return ok
}

func isDaemonSetPod(p *apiv1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}
