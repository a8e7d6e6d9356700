package builder

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/informercache"
)

// Informers is the cluster-wide shared informer factory and the listers the
// loop reads.
type Informers struct {
	Factory informers.SharedInformerFactory
	Listers core.Listers
}

// NewInformers builds the shared informer factory with the cache's
// transform; the transform's pod sharing runs until informerCtx ends. The
// factory is started by SyncInformers.
func NewInformers(informerCtx context.Context, client kubernetes.Interface) *Informers {
	trim := informercache.NewTrimmer()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim.Transform))
	go trim.Run(informerCtx, factory.Core().V1().Pods().Informer())
	return &Informers{Factory: factory,
		Listers: core.Listers{Nodes: factory.Core().V1().Nodes().Lister(), Pods: factory.Core().V1().Pods().Lister()}}
}

// SyncInformers starts the factories on informerCtx and waits for their
// caches; each factory's shutdown (after stopInformers) is pushed on stack.
// It reports false (with nil when ctx ended, else the error) when they did
// not sync.
func SyncInformers(ctx, informerCtx context.Context, stack *Stack, stopInformers func(),
	factories ...informers.SharedInformerFactory) (bool, error) {
	for _, f := range factories {
		f.Start(informerCtx.Done())
		stack.Defer(func() { stopInformers(); f.Shutdown() })
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				if ctx.Err() != nil {
					return false, nil
				}
				return false, fmt.Errorf("syncing the %v informer cache", typ)
			}
		}
	}
	return true, nil
}

// SyncRequests runs the ProvisioningRequest informer (nil when requests are
// off: nothing to do) on informerCtx and waits for its cache.
func SyncRequests(ctx, informerCtx context.Context, informer cache.SharedIndexInformer) error {
	if informer == nil {
		return nil
	}
	go informer.RunWithContext(informerCtx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("syncing the ProvisioningRequest informer cache (is the CRD installed?)")
	}
	return nil
}
