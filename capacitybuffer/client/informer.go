package client

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// NewInformer returns a shared informer of the buffers of every namespace,
// indexed by namespace, with the given resync period (0: none). Start it
// with RunWithContext and wait for HasSynced before trusting its lister.
func NewInformer(c *Client, resync time.Duration) cache.SharedIndexInformer {
	buffers := c.CapacityBuffers("")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return buffers.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return buffers.Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(lw, &v1.CapacityBuffer{}, cache.SharedIndexInformerOptions{
		ResyncPeriod:      resync,
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: v1.ResourcePlural + "." + v1.GroupName,
	})
}

// Lister reads CapacityBuffers from an informer's cache. The objects it
// returns are the cache's own: copy (DeepCopy) before changing one.
type Lister struct {
	all listers.ResourceIndexer[*v1.CapacityBuffer]
}

// NewLister returns a lister over indexer, typically NewInformer(...).GetIndexer().
func NewLister(indexer cache.Indexer) *Lister {
	return &Lister{all: listers.New[*v1.CapacityBuffer](indexer, v1.Resource(v1.ResourcePlural))}
}

// List returns the buffers of every namespace.
func (l *Lister) List() ([]*v1.CapacityBuffer, error) {
	return l.all.List(labels.Everything())
}

// Get returns one buffer, or a NotFound error.
func (l *Lister) Get(namespace, name string) (*v1.CapacityBuffer, error) {
	return listers.NewNamespaced(l.all, namespace).Get(name)
}

// InNamespace returns the buffers of one namespace.
func (l *Lister) InNamespace(namespace string) ([]*v1.CapacityBuffer, error) {
	return listers.NewNamespaced(l.all, namespace).List(labels.Everything())
}
