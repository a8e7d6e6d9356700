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

	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// NewInformer returns a shared informer of the requests in namespace (""
// for all namespaces), indexed by namespace (cache.NamespaceIndex), with the
// given resync period (0: none). Start it with Run(ctx) or RunWithContext and
// wait for HasSynced before trusting its lister.
func NewInformer(c *Client, namespace string, resync time.Duration) cache.SharedIndexInformer {
	prs := c.ProvisioningRequests(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return prs.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return prs.Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(lw, &v1.ProvisioningRequest{}, cache.SharedIndexInformerOptions{
		ResyncPeriod:      resync,
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: "provisioningrequests." + v1.GroupName,
	})
}

// Lister reads ProvisioningRequests from an informer's cache. The objects it
// returns are the cache's own: copy (DeepCopy) before changing one.
type Lister struct {
	all listers.ResourceIndexer[*v1.ProvisioningRequest]
}

// NewLister returns a lister over indexer, typically NewInformer(...).GetIndexer().
// A namespace index (cache.NamespaceIndex) makes per-namespace lists cheap.
func NewLister(indexer cache.Indexer) *Lister {
	return &Lister{all: listers.New[*v1.ProvisioningRequest](indexer, v1.Resource(v1.ResourcePlural))}
}

// List returns the requests of every namespace that match selector.
func (l *Lister) List(selector labels.Selector) ([]*v1.ProvisioningRequest, error) {
	return l.all.List(selector)
}

// Get returns one request, or a NotFound error.
func (l *Lister) Get(namespace, name string) (*v1.ProvisioningRequest, error) {
	return l.ProvisioningRequests(namespace).Get(name)
}

// ProvisioningRequests returns the lister of one namespace.
func (l *Lister) ProvisioningRequests(namespace string) NamespaceLister {
	return NamespaceLister{idx: listers.NewNamespaced(l.all, namespace)}
}

// NamespaceLister reads the requests of one namespace from the cache.
type NamespaceLister struct {
	idx listers.ResourceIndexer[*v1.ProvisioningRequest]
}

// List returns the namespace's requests that match selector.
func (l NamespaceLister) List(selector labels.Selector) ([]*v1.ProvisioningRequest, error) {
	return l.idx.List(selector)
}

// Get returns the namespace's request of that name, or a NotFound error.
func (l NamespaceLister) Get(name string) (*v1.ProvisioningRequest, error) {
	return l.idx.Get(name)
}
