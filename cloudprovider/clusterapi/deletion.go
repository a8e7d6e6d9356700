package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// OwnDeletionAnnotation is the autoscaler's own record on a Machine it chose
// for deletion: it is written, together with DeleteMachineAnnotation, just
// before the group's replicas are lowered by one for that Machine, and
// removed again only when that decrease certainly did not happen. Its value
// is the time of the marking (RFC 3339). A Machine that carries it counts
// as being deleted: it is never the reason for a second decrease. A
// delete-machine annotation without it is a user's choice of the Machine
// to go first at their own scale-down, and lowers nothing by itself.
const OwnDeletionAnnotation = "cluster-autoscaler.kubernetes.io/machine-deletion"

// MarkedDeletionTimeout is how long a Machine may carry OwnDeletionAnnotation
// without a deletion timestamp before it is reported as stuck (the
// MachineSet controller not running, or someone having raised the
// replicas since). The replicas are not lowered again even then: removing
// OwnDeletionAnnotation by hand lets the autoscaler choose it anew.
const MarkedDeletionTimeout = 10 * time.Minute

// errOutcomeUnknown says a write may or may not have been applied (a
// timeout, a server error, a broken connection).
var errOutcomeUnknown = errors.New("the outcome of the write is unknown")

// DeleteNodes deletes the Machines of nodes: it marks each with
// DeleteMachineAnnotation and OwnDeletionAnnotation, then lowers replicas by
// the number of Machines marked, so that Cluster API deletes exactly those.
// Nodes of other groups, a request that would go below the min size, and
// any request while the group is paused or (a MachineDeployment) rolling
// out, as the API server says now, are refused before anything changes.
//
// Each Machine is read from the API server first: one being deleted, gone,
// or already carrying OwnDeletionAnnotation is already going and lowers
// nothing again (its delete-machine annotation is put back if it was
// removed), however many times, from however many callers, its deletion is
// asked for before Cluster API acts. The mark is conditional on the
// Machine's resourceVersion, so two concurrent callers cannot both take it
// as theirs.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*apiv1.Node) error {
	logger := klog.FromContext(ctx)
	g.provider.deleteMu.Lock()
	defer g.provider.deleteMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if why := g.deletionBlocked(ctx); why != "" {
		logger.Info("Refusing to delete nodes of a paused or rolling out Cluster API node group", "nodeGroup", g.Id(),
			"nodes", len(nodes), "why", why)
		return fmt.Errorf("deleting %d nodes of node group %q: refused: %s", len(nodes), g.Id(), why)
	}
	names, err := g.machineNames(nodes)
	if err != nil {
		return err
	}
	var fresh []*unstructured.Unstructured
	for _, name := range names {
		m, err := g.machineToMark(ctx, name)
		if err != nil {
			return fmt.Errorf("deleting nodes of node group %q: %w", g.Id(), err)
		}
		if m != nil {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	if g.target-len(fresh) < g.minSize {
		return fmt.Errorf("deleting %d nodes of node group %q: size %d would go below min size %d",
			len(fresh), g.Id(), g.target-len(fresh), g.minSize)
	}
	var marked []*unstructured.Unstructured
	for _, m := range fresh {
		done, err := g.mark(ctx, m)
		if err != nil {
			g.unmark(ctx, marked)
			return fmt.Errorf("marking Machine %s/%s of node group %q for deletion: %w", m.GetNamespace(), m.GetName(), g.Id(), err)
		}
		if done != nil {
			marked = append(marked, done)
			logger.Info("Marked a Cluster API Machine for deletion", "nodeGroup", g.Id(), "machine", klog.KObj(m))
		}
	}
	if len(marked) == 0 {
		return nil
	}
	from, to, err := g.scale(ctx, g.target, g.target-len(marked), true)
	if err != nil {
		if errors.Is(err, errOutcomeUnknown) {
			// The replicas may have been lowered: the marks stay, so that
			// Cluster API removes these Machines and no other, and so that
			// no later call lowers the replicas for them again. If the
			// write did not happen, they stay and are reported as stuck.
			logger.Error(err, "Lowering the replicas for marked Machines may have failed; keeping their marks", "nodeGroup", g.Id(),
				"machines", len(marked))
			return fmt.Errorf("deleting %d nodes of node group %q: %w", len(marked), g.Id(), err)
		}
		g.unmark(ctx, marked)
		return fmt.Errorf("deleting %d nodes of node group %q: %w", len(marked), g.Id(), err)
	}
	logger.Info("Scaled Cluster API node group down", "nodeGroup", g.Id(), "from", from, "to", to)
	g.target = to
	return nil
}

// machineNames resolves nodes to the names of the group's Machines (from
// the loop's snapshot), each once, in order.
func (g *NodeGroup) machineNames(nodes []*apiv1.Node) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, n := range nodes {
		m := g.machineOf(n)
		if m == nil && g.kind == kindMachinePool && g.hasInstance(n.Spec.ProviderID) {
			return nil, fmt.Errorf("deleting node %s of node group %q: %w: a MachinePool instance without a Machine",
				n.Name, g.Id(), cloudprovider.ErrNotImplemented)
		}
		if m == nil {
			return nil, fmt.Errorf("deleting nodes of node group %q: node %s (provider ID %q) has no Machine in this group",
				g.Id(), n.Name, n.Spec.ProviderID)
		}
		if !seen[m.GetName()] {
			seen[m.GetName()] = true
			names = append(names, m.GetName())
		}
	}
	return names, nil
}

func (g *NodeGroup) machineClient() dynamic.ResourceInterface {
	return g.provider.client.Resource(g.provider.gvr(kindMachine)).Namespace(g.obj.GetNamespace())
}

// machineToMark reads Machine name from the API server and returns it when
// its deletion is still to be asked for; nil when it is already going
// (gone, being deleted, or marked by the autoscaler).
func (g *NodeGroup) machineToMark(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	m, err := g.machineClient().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("Machine to delete is gone already", "nodeGroup", g.Id(),
			"machine", klog.KRef(g.obj.GetNamespace(), name))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Machine %s/%s: %w", g.obj.GetNamespace(), name, err)
	}
	if !g.alreadyGoing(ctx, m) {
		return m, nil
	}
	return nil, nil
}

// alreadyGoing reports whether Machine m (as the API server has it now) is
// being deleted or carries OwnDeletionAnnotation. For a marked one it puts
// back a missing delete-machine annotation, so that Cluster API takes this
// Machine for the decrease already made, and reports it when it has been
// marked for longer than MarkedDeletionTimeout.
func (g *NodeGroup) alreadyGoing(ctx context.Context, m *unstructured.Unstructured) bool {
	logger := klog.FromContext(ctx)
	if m.GetDeletionTimestamp() != nil {
		logger.V(2).Info("Machine to delete is being deleted already", "nodeGroup", g.Id(), "machine", klog.KObj(m))
		return true
	}
	markedAt, ours := m.GetAnnotations()[OwnDeletionAnnotation]
	if !ours {
		return false
	}
	logger.V(2).Info("Machine to delete was marked by the autoscaler already; not lowering the replicas again",
		"nodeGroup", g.Id(), "machine", klog.KObj(m), "markedAt", markedAt)
	if _, has := m.GetAnnotations()[DeleteMachineAnnotation]; !has {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, DeleteMachineAnnotation, markedAt)
		if _, err := g.machineClient().Patch(ctx, m.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			logger.Error(err, "Could not put back the delete-machine annotation of a Machine the autoscaler marked", "machine", klog.KObj(m))
		} else {
			logger.Info("Put back the delete-machine annotation of a Machine the autoscaler marked", "nodeGroup", g.Id(),
				"machine", klog.KObj(m), "markedAt", markedAt)
		}
	}
	g.provider.reportStuck(ctx, m)
	return true
}

// mark writes both annotations onto m on the condition that m is unchanged
// since it was read. When it has changed, it is read again: if it is
// already going by now, nil is returned and nothing written.
func (g *NodeGroup) mark(ctx context.Context, m *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	now := g.provider.clock.Now().UTC().Format(time.RFC3339)
	for attempt := 0; ; attempt++ {
		meta := map[string]any{"annotations": map[string]any{DeleteMachineAnnotation: now, OwnDeletionAnnotation: now}}
		if rv := m.GetResourceVersion(); rv != "" {
			meta["resourceVersion"] = rv // a precondition: a changed Machine is a conflict
		}
		patch, err := (&unstructured.Unstructured{Object: map[string]any{"metadata": meta}}).MarshalJSON()
		if err != nil {
			return nil, err
		}
		_, err = g.machineClient().Patch(ctx, m.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return m, nil
		}
		if !apierrors.IsConflict(err) || attempt == 3 {
			return nil, err
		}
		if m, err = g.machineToMark(ctx, m.GetName()); m == nil || err != nil {
			return nil, err
		}
	}
}

// unmark takes back the marks of Machines whose replica decrease certainly
// did not happen: OwnDeletionAnnotation, and DeleteMachineAnnotation unless
// it was there before (a user's). Best effort: a mark left behind only
// keeps its Machine from being deleted by the autoscaler, it never makes
// one go.
func (g *NodeGroup) unmark(ctx context.Context, marked []*unstructured.Unstructured) {
	for _, m := range marked {
		keys := map[string]any{OwnDeletionAnnotation: nil}
		if _, users := m.GetAnnotations()[DeleteMachineAnnotation]; !users {
			keys[DeleteMachineAnnotation] = nil
		}
		patch, err := (&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"annotations": keys}}}).MarshalJSON()
		if err == nil {
			_, err = g.machineClient().Patch(ctx, m.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Could not unmark a Machine after a failed scale-down; it is not deleted by the autoscaler until its annotation is removed",
				"machine", klog.KObj(m), "annotation", OwnDeletionAnnotation)
		}
	}
}

// reportStuck logs, once per marking, a Machine that has carried
// OwnDeletionAnnotation for longer than MarkedDeletionTimeout without being
// deleted.
func (p *Provider) reportStuck(ctx context.Context, m *unstructured.Unstructured) {
	markedAt := m.GetAnnotations()[OwnDeletionAnnotation]
	at, err := time.Parse(time.RFC3339, markedAt)
	if err != nil || m.GetDeletionTimestamp() != nil || p.clock.Since(at) <= MarkedDeletionTimeout {
		return
	}
	key := m.GetNamespace() + "/" + m.GetName() + "@" + markedAt
	p.stuckMu.Lock()
	defer p.stuckMu.Unlock()
	if p.stuck[key] {
		return
	}
	if p.stuck == nil {
		p.stuck = map[string]bool{}
	}
	p.stuck[key] = true
	klog.FromContext(ctx).Error(nil, "A Machine the autoscaler marked for deletion is still not being deleted; the replicas are not lowered again "+
		"(is the MachineSet controller running? were the replicas raised since?). Remove the annotation to let the autoscaler delete it anew",
		"machine", klog.KObj(m), "markedAt", markedAt, "annotation", OwnDeletionAnnotation, "after", MarkedDeletionTimeout)
}
