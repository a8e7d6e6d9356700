package builder

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
	cbclient "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/client"
	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/controller"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors/capacitybuffers"
)

// injectionFieldManager writes the buffers' Provisioning condition, as the
// loop's other status writes (ProvisioningRequests) do.
const injectionFieldManager = "cluster-autoscaler"

// Buffers is the CapacityBuffer wiring: one informer, the loop's injector
// (--capacity-buffer-pod-injection-enabled, which also writes readyReplicas
// with --capacity-buffer-ready-replicas-enabled) and the controller
// (--capacity-buffer-controller-enabled), each nil when its flag is off.
type Buffers struct {
	informer   cache.SharedIndexInformer
	Injector   *capacitybuffers.Injector
	controller *controller.Controller
	// ready applies the injector's readyReplicas off the loop; nil unless
	// --capacity-buffer-ready-replicas-enabled.
	ready *capacitybuffers.AsyncWriter
}

// readyReplicasWorkers apply readyReplicas at once, as upstream's.
const readyReplicasWorkers = 10

// NewBuffers wires what the CapacityBuffer flags ask for; nil when none.
// It fails when the CRD is not served, as --enable-provisioning-requests does.
func NewBuffers(ctx context.Context, opts config.Options, restConfig *rest.Config,
	factory informers.SharedInformerFactory, recorder record.EventRecorder, m *metrics.Metrics) (*Buffers, error) {
	if !opts.CapacityBufferControllerEnabled && !opts.CapacityBufferPodInjectionEnabled {
		return nil, nil
	}
	c, err := cbclient.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building the CapacityBuffer client: %w", err)
	}
	listCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.CapacityBuffers("").List(listCtx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("--capacity-buffer-*: the CapacityBuffer CRD (capacitybuffers.autoscaling.x-k8s.io, v1beta1) is not installed: %w", err)
		}
		return nil, fmt.Errorf("--capacity-buffer-*: listing CapacityBuffers: %w", err)
	}
	b := &Buffers{informer: cbclient.NewInformer(c, 0)}
	lister := cbclient.NewLister(b.informer.GetIndexer())
	templateLister := factory.Core().V1().PodTemplates().Lister()
	if opts.CapacityBufferPodInjectionEnabled {
		iopts := []capacitybuffers.Option{capacitybuffers.WithEventRecorder(recorder),
			capacitybuffers.WithInjectionLimit(opts.PodInjectionLimit)}
		if opts.CapacityBufferReadyReplicasEnabled {
			// A client of its own: a burst of these writes waits on its
			// own rate limiter, not on the Provisioning condition's.
			rc, err := cbclient.NewForConfig(restConfig)
			if err != nil {
				return nil, fmt.Errorf("building the CapacityBuffer readyReplicas client: %w", err)
			}
			b.ready = capacitybuffers.NewAsyncWriter(cbclient.NewStatusWriter(rc, capacitybuffers.ReadyReplicasFieldManager))
			iopts = append(iopts, capacitybuffers.WithReadyReplicas(b.ready))
		}
		b.Injector = capacitybuffers.New(lister, cbclient.NewPodTemplates(templateLister),
			cbclient.NewStatusWriter(c, injectionFieldManager), iopts...)
	}
	if !opts.CapacityBufferControllerEnabled {
		return b, nil
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building the dynamic client of the CapacityBuffer controller: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building the discovery client of the CapacityBuffer controller: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	// The controller's writes (templates, dry-runs) get a client of their
	// own, so that a burst of buffers does not hold up the loop's writes
	// behind one rate limiter.
	own, err := kubernetes.NewForConfig(rest.CopyConfig(restConfig))
	if err != nil {
		return nil, fmt.Errorf("building the client of the CapacityBuffer controller: %w", err)
	}
	quotas := factory.Core().V1().ResourceQuotas()
	copts := []controller.Option{controller.WithEventRecorder(recorder),
		controller.WithQuotas(controller.NewResourceQuotas(quotas.Lister()))}
	if opts.CapacityBufferPodDryRunEnabled {
		copts = append(copts, controller.WithDryRun(controller.NewDryRunPods(own)))
	}
	b.controller = controller.New(lister,
		controller.NewAPITemplates(cbclient.NewPodTemplates(templateLister), own.CoreV1()),
		controller.NewScaleClient(dyn, mapper, factory.Core().V1().Pods().Lister()),
		cbclient.NewStatusWriter(c, controller.FieldManager), copts...)
	if err := m.Registerer().Register(b.controller.Collector()); err != nil {
		return nil, fmt.Errorf("registering the CapacityBuffer metric: %w", err)
	}
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{b.informer, b.controller.BufferHandler()},
		{factory.Core().V1().PodTemplates().Informer(), b.controller.PodTemplateHandler()},
		{quotas.Informer(), b.controller.QuotaHandler()},
		{factory.Apps().V1().Deployments().Informer(), b.controller.ScalableHandler("apps", "Deployment")},
		{factory.Apps().V1().ReplicaSets().Informer(), b.controller.ScalableHandler("apps", "ReplicaSet")},
		{factory.Apps().V1().StatefulSets().Informer(), b.controller.ScalableHandler("apps", "StatefulSet")},
		{factory.Core().V1().ReplicationControllers().Informer(), b.controller.ScalableHandler("", "ReplicationController")},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return nil, fmt.Errorf("watching for the CapacityBuffer controller: %w", err)
		}
	}
	return b, nil
}

// StartInformer runs the buffer informer on informerCtx and waits for its
// cache; with the injector, a buffer whose translation changes asks for a
// loop at once.
func (b *Buffers) StartInformer(ctx, informerCtx context.Context, runner core.LoopTrigger) error {
	if b.Injector != nil {
		if _, err := b.informer.AddEventHandler(translationTrigger(runner)); err != nil {
			return fmt.Errorf("watching CapacityBuffers: %w", err)
		}
	}
	go b.informer.RunWithContext(informerCtx)
	if !cache.WaitForCacheSync(ctx.Done(), b.informer.HasSynced) && ctx.Err() == nil {
		return fmt.Errorf("syncing the CapacityBuffer informer cache (is the CRD installed?)")
	}
	return nil
}

// RunController runs the controller and the readyReplicas writer, those
// that are on, until ctx ends; the returned function waits for them to
// stop.
func (b *Buffers) RunController(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	if b.controller != nil {
		wg.Go(func() { b.controller.Run(ctx) })
	}
	if b.ready != nil {
		wg.Go(func() { b.ready.Run(ctx, readyReplicasWorkers) })
	}
	return wg.Wait
}

// translationTrigger asks for a loop when a buffer's translation (template,
// replicas, readiness) changes, so that its room is provisioned within a
// loop, not a scan interval later.
func translationTrigger(r core.LoopTrigger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.CapacityBuffer)
			cur, ok2 := newObj.(*v1.CapacityBuffer)
			if !ok1 || !ok2 || !capacitybuffer.Ready(cur) {
				return
			}
			if !capacitybuffer.Ready(old) || *old.Status.Replicas != *cur.Status.Replicas ||
				old.Status.PodTemplateRef.Name != cur.Status.PodTemplateRef.Name ||
				ptrValue(old.Status.PodTemplateGeneration) != ptrValue(cur.Status.PodTemplateGeneration) {
				r.Trigger()
			}
		},
	}
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
