package whatif

import (
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Lister lists the pods of real and, after them, the pods extra: the loop
// sees the manifests' pods as if they had been created.
func Lister(real corelisters.PodLister, extra []*apiv1.Pod) corelisters.PodLister {
	return &lister{PodLister: real, extra: extra}
}

type lister struct {
	corelisters.PodLister
	extra []*apiv1.Pod
}

func (l *lister) List(selector labels.Selector) ([]*apiv1.Pod, error) {
	pods, err := l.PodLister.List(selector)
	if err != nil {
		return nil, err
	}
	for _, p := range l.extra {
		if selector.Matches(labels.Set(p.Labels)) {
			pods = append(pods, p)
		}
	}
	return pods, nil
}
