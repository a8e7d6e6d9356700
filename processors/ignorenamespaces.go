package processors

import (
	"context"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// IgnoreNamespaces is a pod-list processor that keeps the pending pods of
// some namespaces from triggering a scale-up (a sandbox whose pods may wait,
// a namespace another autoscaler serves). It is not in the default set: it
// is the FAQ's example of a fork's processor ("How do I extend it in my own
// build?"), added with one line in builder/processors.go. The
// pods stay pending; scale-down still treats the ones that are scheduled
// like any other.
type IgnoreNamespaces struct {
	Namespaces []string
}

// ProcessPods implements PodListProcessor.
func (p IgnoreNamespaces) ProcessPods(ctx context.Context, _ *Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	ignored := make(map[string]bool, len(p.Namespaces))
	for _, ns := range p.Namespaces {
		ignored[ns] = true
	}
	out := make([]*apiv1.Pod, 0, len(pods))
	dropped := 0
	for _, pod := range pods {
		if ignored[pod.Namespace] {
			dropped++
			continue
		}
		out = append(out, pod)
	}
	if dropped > 0 {
		klog.FromContext(ctx).V(2).Info("Pending pods of ignored namespaces do not trigger a scale-up",
			"pods", dropped, "namespaces", p.Namespaces)
	}
	return out
}
