package scaleup

import (
	"fmt"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
)

// InstancePods tells a rollback what runs on the instances it is about to
// delete, read just before the deletion: a node that runs pods other than
// the request's is never deleted by a rollback.
type InstancePods interface {
	// PodsOn returns, by instance id, the Node registered for each of ids
	// that has one and the pods bound to it; an instance without a Node is
	// left out.
	PodsOn(ids []string) (map[string]NodePods, error)
}

// NodePods are the pods bound to one instance's Node.
type NodePods struct {
	Node string
	Pods []*apiv1.Pod
}

// WithInstancePods makes rollbacks check, just before deleting an
// instance, that its Node runs no pod but the request's own, DaemonSet and
// static pods and pods that finished; an instance whose Node runs others
// is kept (Undo.Kept says why). Without it no such check is made.
func WithInstancePods(p InstancePods) Option { return func(o *Orchestrator) { o.instancePods = p } }

// NodeLister and PodLister are the informer listers InstancePodsFromListers reads.
type NodeLister interface {
	List(selector labels.Selector) ([]*apiv1.Node, error)
}

// PodLister lists pods; the informer's lister implements it.
type PodLister interface {
	List(selector labels.Selector) ([]*apiv1.Pod, error)
}

// InstancePodsFromListers answers InstancePods from the informer caches.
type InstancePodsFromListers struct {
	Nodes NodeLister
	Pods  PodLister
}

// PodsOn implements InstancePods: one pass over the Nodes and one over the
// pods, however many instances are asked about.
func (l InstancePodsFromListers) PodsOn(ids []string) (map[string]NodePods, error) {
	want := make(map[string]string, len(ids)) // normalized provider ID -> instance id
	for _, id := range ids {
		want[clusterstate.NormalizeProviderID(id)] = id
	}
	nodes, err := l.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := map[string]NodePods{}
	byNode := map[string]string{} // node name -> instance id
	for _, n := range nodes {
		if id, ok := want[clusterstate.NormalizeProviderID(n.Spec.ProviderID)]; ok && n.Spec.ProviderID != "" {
			out[id] = NodePods{Node: n.Name}
			byNode[n.Name] = id
		}
	}
	if len(byNode) == 0 {
		return out, nil
	}
	pods, err := l.Pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for _, p := range pods {
		if id, ok := byNode[p.Spec.NodeName]; ok {
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
		if consumed, ok := provreq.ConsumedRequestName(p); ok && request != "" && p.Namespace == ns && consumed == name {
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
