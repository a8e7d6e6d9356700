package scaleup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/podutil"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// InstancePods tells a rollback what runs on the instances it is about to
// delete, read just before the deletion: a node that runs pods other than
// the request's is never deleted by a rollback, nor is an instance that a
// Node may be without its provider saying so for sure.
type InstancePods interface {
	// PodsOn returns, by instance id, the Node that is (or may be) each of
	// ids and the pods bound to it; an instance that no Node is, or may
	// be, is left out.
	PodsOn(ctx context.Context, ids []string) (map[string]NodePods, error)
}

// NodePods are the pods bound to one instance's Node.
type NodePods struct {
	Node string
	Pods []*apiv1.Pod
	// Unsure is set when Node only may be the instance (see
	// cloudprovider.Identify), and says why: the instance is kept.
	Unsure string
}

// WithInstancePods makes rollbacks check, just before deleting an
// instance, that its Node runs no pod but the request's own, DaemonSet and
// static pods and pods that finished; an instance whose Node runs others,
// or that a Node may be, is kept (Undo.Kept says why). Without it no such
// check is made.
func WithInstancePods(p InstancePods) Option { return func(o *Orchestrator) { o.instancePods = p } }

// NodeLister and PodLister are the informer listers InstancePodsFromListers reads.
type NodeLister interface {
	List(selector labels.Selector) ([]*apiv1.Node, error)
}

// PodLister lists pods; the informer's lister implements it.
type PodLister interface {
	List(selector labels.Selector) ([]*apiv1.Pod, error)
}

// LivePods reads the pods bound to a node from the API server, not from a
// cache: a pod bound after the cache's last update is seen.
type LivePods interface {
	PodsOnNode(ctx context.Context, node string) ([]*apiv1.Pod, error)
}

// InstancePodsFromListers answers InstancePods: Nodes are matched to
// instances the way Provider matches them (cloudprovider.Identify, over
// every group's listing), and the pods of each matched Node are read live
// through Live when it is set (else from the Pods lister).
type InstancePodsFromListers struct {
	Provider cloudprovider.CloudProvider
	Nodes    NodeLister
	Pods     PodLister
	Live     LivePods
}

// PodsOn implements InstancePods.
func (l InstancePodsFromListers) PodsOn(ctx context.Context, ids []string) (map[string]NodePods, error) {
	nodes, err := l.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	groups, err := l.Provider.NodeGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing node groups: %w", err)
	}
	listed := make(map[string][]cloudprovider.Instance, len(groups))
	for _, g := range groups {
		if listed[g.Id()], err = g.Nodes(ctx); err != nil {
			return nil, fmt.Errorf("listing the instances of %q: %w", g.Id(), err)
		}
	}
	identities := cloudprovider.Identify(ctx, l.Provider, nodes, listed)
	out := map[string]NodePods{}
	byNode := map[string][]string{} // node name -> instance ids
	for _, id := range ids {
		node, m := identities.NodeOf(id)
		switch m {
		case cloudprovider.SureMatch:
			out[id] = NodePods{Node: node}
		case cloudprovider.MaybeMatch:
			why := identities.Why(node)
			if why == "" {
				why = "its provider ID looks like the instance's"
			}
			out[id] = NodePods{Node: node, Unsure: why}
		default:
			continue
		}
		byNode[node] = append(byNode[node], id)
	}
	if len(byNode) == 0 {
		return out, nil
	}
	if l.Live != nil {
		for node, instances := range byNode {
			pods, err := l.Live.PodsOnNode(ctx, node)
			if err != nil {
				return nil, fmt.Errorf("reading the pods of node %s: %w", node, err)
			}
			for _, id := range instances {
				np := out[id]
				np.Pods = pods
				out[id] = np
			}
		}
		return out, nil
	}
	pods, err := l.Pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for _, p := range pods {
		for _, id := range byNode[p.Spec.NodeName] {
			np := out[id]
			np.Pods = append(np.Pods, p)
			out[id] = np
		}
	}
	return out, nil
}

// foreignPods names the pods of np that keep a rollback from deleting the
// node: any pod that has not finished, is neither a DaemonSet's nor a
// static one, and does not consume request (namespace/name; "" when the
// request is not known, and then every such pod counts).
func foreignPods(np NodePods, request string) []string {
	ns, name, _ := strings.Cut(request, "/")
	var out []string
	for _, p := range np.Pods {
		if p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed || drain.IsDaemonSetPod(p) || drain.IsMirrorPod(p) {
			continue
		}
		if consumed, ok := podutil.ConsumedRequestName(p); ok && request != "" && p.Namespace == ns && consumed == name {
			continue
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

// keptReason says why an instance whose node runs pods is kept.
func keptReason(node string, pods []string) string {
	const shown = 3
	list := strings.Join(pods[:min(len(pods), shown)], ", ")
	if len(pods) > shown {
		list += fmt.Sprintf(" and %d more", len(pods)-shown)
	}
	return fmt.Sprintf("node %s runs pods that are not the request's: %s", node, list)
}

// Rollback undoes all-or-nothing scale-ups that failed, timed out or whose
// request is gone, group by group: it deletes by name the listed instances
// that still exist and are not being deleted already, then decreases the group's target size by the instances
// that were asked for and never listed, as far as the target still holds
// more than the listed instances (it never asks the provider to drop a
// listed instance that way). An instance whose node runs pods other than
// the request's (see WithInstancePods) is not deleted: it is returned, and
// Kept says why. It returns, by group, what it could not undo
// yet: instances whose deletion failed or that were kept, and asked-for instances that were
// neither listed nor covered by the target any more (they may have been
// listed meanwhile; the caller looks for them and calls again). A group that
// no longer exists is reported with ErrNodeGroupGone and not left.
func (o *Orchestrator) Rollback(ctx context.Context, undo map[string]Undo, why string) (map[string]Undo, error) {
	logger := klog.FromContext(ctx)
	left := map[string]Undo{}
	ngs, err := o.provider.NodeGroups(ctx)
	if err != nil {
		for id, u := range undo {
			left[id] = u
		}
		return left, fmt.Errorf("listing node groups: %w", err)
	}
	byID := map[string]cloudprovider.NodeGroup{}
	for _, ng := range ngs {
		byID[ng.Id()] = ng
	}
	var errs []error
	ids := make([]string, 0, len(undo))
	for id := range undo {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		u := undo[id]
		if u.Empty() {
			continue
		}
		ng := byID[id]
		if ng == nil || !ng.Exist() {
			errs = append(errs, fmt.Errorf("node group %q: its instances %v could not be rolled back: %w", id, u.Instances, ErrNodeGroupGone))
			continue
		}
		rest, err := o.rollbackGroup(ctx, ng, u, why)
		if err != nil {
			errs = append(errs, err)
		}
		if !rest.Empty() {
			left[id] = rest
		}
	}
	if len(left) > 0 {
		logger.V(2).Info("All-or-nothing rollback not finished; it is retried", "left", left)
	}
	return left, errors.Join(errs...)
}

// rollbackGroup undoes one group's share and returns what is left of it.
func (o *Orchestrator) rollbackGroup(ctx context.Context, ng cloudprovider.NodeGroup, u Undo, why string) (Undo, error) {
	logger := klog.FromContext(ctx)
	id := ng.Id()
	current, err := ng.Nodes(ctx)
	if err != nil {
		return u, fmt.Errorf("listing the instances of %q: %w", id, err)
	}
	// An instance the provider deletes already (a rollback cut short by a
	// restart, say) is not asked for again: it goes all the same.
	exists := map[string]bool{}
	for _, in := range current {
		exists[in.Id] = in.Status == nil || in.Status.State != cloudprovider.InstanceDeleting
	}
	var ids []string
	for _, instance := range u.Instances {
		if exists[instance] {
			ids = append(ids, instance)
		}
	}
	ids, kept, err := o.withoutBusy(ctx, ids, u.Request)
	if err != nil {
		return u, fmt.Errorf("checking the pods on the instances of %q before deleting them: %w", id, err)
	}
	for instance, reason := range kept {
		logger.Info("Keeping an instance of a rolled back all-or-nothing scale-up: its node runs other pods, or a node may be it",
			"instance", instance, "nodeGroup", id, "why", reason, "reason", why)
	}
	victims := make([]*apiv1.Node, 0, len(ids))
	for _, instance := range ids {
		victims = append(victims, cloudprovider.InstanceNode(instance))
	}
	if len(victims) > 0 {
		err := ng.ForceDeleteNodes(ctx, victims)
		if errors.Is(err, cloudprovider.ErrNotImplemented) {
			err = ng.DeleteNodes(ctx, victims)
		}
		if err != nil {
			u.Kept = kept
			return u, fmt.Errorf("deleting %d instances of %q: %w", len(victims), id, err)
		}
		for _, v := range victims {
			logger.Info("Deleted instance of a rolled back all-or-nothing scale-up", "instance", v.Spec.ProviderID,
				"nodeGroup", id, "reason", why)
		}
		if o.countDeletions != nil {
			o.countDeletions(RollbackReason, len(victims))
		}
	}
	rest := Undo{Unlisted: u.Unlisted, Request: u.Request}
	if len(kept) > 0 {
		rest.Kept = kept
		for _, instance := range u.Instances {
			if kept[instance] != "" {
				rest.Instances = append(rest.Instances, instance)
			}
		}
	}
	if u.Unlisted <= 0 {
		return rest, nil
	}
	target, err := ng.TargetSize(ctx)
	if err != nil {
		return rest, fmt.Errorf("reading the target size of %q: %w", id, err)
	}
	if current, err = ng.Nodes(ctx); err != nil {
		return rest, fmt.Errorf("listing the instances of %q: %w", id, err)
	}
	cancel := min(u.Unlisted, target-len(current))
	if cancel <= 0 {
		return rest, nil
	}
	if err := ng.DecreaseTargetSize(ctx, -cancel); err != nil {
		return rest, fmt.Errorf("decreasing the target size of %q by %d: %w", id, cancel, err)
	}
	logger.Info("Decreased the target size for instances of a rolled back all-or-nothing scale-up that were never listed",
		"nodeGroup", id, "from", target, "to", target-cancel, "reason", why)
	rest.Unlisted -= cancel
	return rest, nil
}

// withoutBusy splits ids into the instances a rollback may delete and
// those it keeps because their nodes run pods other than request's.
func (o *Orchestrator) withoutBusy(ctx context.Context, ids []string, request string) ([]string, map[string]string, error) {
	if o.instancePods == nil || len(ids) == 0 {
		return ids, nil, nil
	}
	onNodes, err := o.instancePods.PodsOn(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var free []string
	var kept map[string]string
	for _, instance := range ids {
		np, ok := onNodes[instance]
		if !ok {
			free = append(free, instance)
			continue
		}
		if np.Unsure != "" {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[instance] = fmt.Sprintf("node %s may be this instance (%s): it is kept", np.Node, np.Unsure)
			continue
		}
		if pods := foreignPods(np, request); len(pods) > 0 {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[instance] = keptReason(np.Node, pods)
			continue
		}
		free = append(free, instance)
	}
	return free, kept, nil
}
