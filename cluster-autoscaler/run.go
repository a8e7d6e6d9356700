package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	"k8s.io/autoscaler/cluster-autoscaler/cleanup"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/healing"
	"k8s.io/autoscaler/cluster-autoscaler/informercache"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/processors/capacitybuffers"
	"k8s.io/autoscaler/cluster-autoscaler/processors/provreqs"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	simframework "k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// runAutoscaler starts the informers once and runs the loop until ctx ends.
// ctx is the lead context (the process context without leader election);
// processCtx ends only when the process is told to stop, so that a lost
// Lease (ctx over, processCtx live) can be told from a shutdown. Each step
// wires one subsystem; what a step must undo at the end is pushed on the
// wiring's stack and undone in reverse order, as defers would be.
func runAutoscaler(ctx, processCtx context.Context, opts config.Options, restConfig *rest.Config, client kubernetes.Interface,
	providers *cloudprovider.Registry, m *metrics.Metrics, health *core.HealthCheck, snapshots *core.Snapshotter,
	explainer *explain.Recorder) error {
	w := &wiring{opts: opts, restConfig: restConfig, client: client, m: m, logger: klog.FromContext(ctx), explain: explainer}
	defer w.unwind()
	if err := w.build(ctx, processCtx, providers); err != nil {
		return err
	}
	runner := w.buildRunner(health, snapshots)
	if err := w.watch(ctx, runner); err != nil || ctx.Err() != nil {
		return err
	}
	if synced, err := w.syncInformers(ctx); !synced {
		return err
	}
	w.startBufferController()
	cleanStaleTaints(ctx, w.listers.Nodes, w.provider, w.taints, w.recorder)
	w.logger.Info("Informer caches synced; starting the loop", "scanInterval", opts.ScanInterval)
	health.StartMonitoring()
	return runner.Run(w.loopCtx)
}

// wiring is what runAutoscaler builds, step by step.
type wiring struct {
	// explain, when set, keeps each loop's reasons for /explainz.
	explain *explain.Recorder
	// wrapProvider, when set, wraps the cloud provider once built
	// (`explain` makes it read-only).
	wrapProvider func(cloudprovider.CloudProvider) cloudprovider.CloudProvider
	// wrapProvReqs, when set, wraps the ProvisioningRequest status
	// writer and record store (`explain` records what the loop would write).
	wrapProvReqs provReqWrappers
	// readOnly (`explain`) attempts no write: events are logged at --v=4,
	// not sent; no DeletionCandidate taint is written or removed and no
	// removal starts; no CapacityQuota status is written; the provider's
	// Cleanup is the wrapped provider's (readonly: nothing to save). The
	// read-only client and provider stay as the safety net.
	readOnly   bool
	opts       config.Options
	restConfig *rest.Config
	client     kubernetes.Interface
	m          *metrics.Metrics
	logger     klog.Logger
	// undo is run in reverse order when runAutoscaler returns.
	undo []func()

	// Informers stop before the deferred shutdowns wait for them, whatever
	// ends runAutoscaler (an error, a recovered panic, the end of ctx).
	informerCtx   context.Context
	stopInformers context.CancelFunc
	factory       informers.SharedInformerFactory
	nsFactory     informers.SharedInformerFactory
	listers       core.Listers

	provider cloudprovider.CloudProvider
	// dra reads the cluster's DRA objects; nil when resource.k8s.io/v1 is
	// not served.
	dra          simframework.DRASource
	recorder     record.EventRecorder
	state        *clusterstate.Registry
	statusRef    *apiv1.ObjectReference
	reporting    *core.Reporting
	orchestrator *scaleup.Orchestrator
	statusWriter *clusterstate.StatusWriter
	scaleDown    *scaledown.ScaleDown
	taints       *scaledown.Taints
	loopCtx      context.Context
	stopLoop     context.CancelFunc

	provreqInformer cache.SharedIndexInformer
	requests        *provreqs.Requests
	bufs            *buffers
	loopOpts        []core.AutoscalerOption
}

// build starts the informer factory and wires every subsystem, in order.
func (w *wiring) build(ctx, processCtx context.Context, providers *cloudprovider.Registry) error {
	w.startInformerFactory(ctx)
	for _, step := range []func(context.Context) error{
		func(ctx context.Context) error { return w.buildProvider(ctx, providers) },
		w.buildEvents,
		w.buildScaleUp,
		func(context.Context) error { w.buildCleanup(); return nil },
		func(ctx context.Context) error { w.buildStatus(ctx, processCtx); return nil },
		func(ctx context.Context) error { w.buildScaleDown(ctx); return nil },
		w.buildProvisioningRequests,
		w.buildBuffers,
		func(context.Context) error { return w.buildProcessors() },
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (w *wiring) onExit(f func()) { w.undo = append(w.undo, f) }

func (w *wiring) unwind() {
	for i := len(w.undo) - 1; i >= 0; i-- {
		w.undo[i]()
	}
}

// startInformerFactory builds the shared informer factory with the cache's
// transform and the listers the loop reads.
func (w *wiring) startInformerFactory(ctx context.Context) {
	w.informerCtx, w.stopInformers = context.WithCancel(ctx)
	w.onExit(w.stopInformers)
	trim := informercache.NewTrimmer()
	w.factory = informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithTransform(trim.Transform))
	go trim.Run(w.informerCtx, w.factory.Core().V1().Pods().Informer())
	w.listers = core.Listers{Nodes: w.factory.Core().V1().Nodes().Lister(), Pods: w.factory.Core().V1().Pods().Lister()}
}

func (w *wiring) buildProvider(ctx context.Context, providers *cloudprovider.Registry) error {
	provider, err := providers.Build(ctx, w.opts.CloudProvider, cloudprovider.BuildOptions{
		Options: w.opts, KubeClient: w.client, InformerFactory: w.factory,
		ResourceLimiter: cloudprovider.ResourceLimiterFromOptions(w.opts),
	})
	if err != nil {
		return err
	}
	w.provider = provider
	if w.wrapProvider != nil {
		w.provider = w.wrapProvider(provider)
	}
	w.onExit(func() {
		// The lead context is over; give the provider a moment of its own.
		cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := w.provider.Cleanup(cleanupCtx); err != nil {
			w.logger.Error(err, "Cloud provider cleanup failed")
		}
	})
	return nil
}

// buildEvents starts the event recorder, the cluster state and reporting.
func (w *wiring) buildEvents(ctx context.Context) error {
	// Events get a client of their own, so that a burst of them does not
	// hold up status writes and cloud actions behind one rate limiter.
	var eventsClient kubernetes.Interface = w.client // offline explain: no API server
	if w.restConfig != nil {
		c, err := kubernetes.NewForConfig(rest.CopyConfig(w.restConfig))
		if err != nil {
			return fmt.Errorf("building the events client: %w", err)
		}
		eventsClient = c
	}
	broadcaster := newEventBroadcaster(ctx, w.opts)
	if w.readOnly {
		broadcaster.StartStructuredLogging(4)
	} else {
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventsClient.CoreV1().Events("")})
	}
	w.onExit(broadcaster.Shutdown)
	w.recorder = broadcaster.NewRecorder(clientgoscheme.Scheme, apiv1.EventSource{Component: "cluster-autoscaler"})
	dra, err := draSource(ctx, w.client, w.factory)
	if err != nil {
		return err
	}
	w.dra = dra
	var stateOpts []clusterstate.RegistryOption
	if w.dra != nil {
		// A node counts as ready once it publishes its template's devices.
		stateOpts = append(stateOpts, clusterstate.WithResourceSlices(w.dra))
	}
	w.state = clusterstate.NewRegistry(w.opts, stateOpts...)
	w.statusRef = &apiv1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: w.opts.Namespace, Name: w.opts.StatusConfigMapName}
	// Cluster-level events go to the status ConfigMap only when it is
	// written, as upstream.
	var clusterEvents *apiv1.ObjectReference
	if w.opts.WriteStatusConfigMap {
		clusterEvents = w.statusRef
	}
	w.reporting = core.NewReporting(w.m, w.provider, w.recorder, clusterEvents)
	return nil
}

// buildScaleUp wires capacity quotas (when enabled) and the scale-up
// orchestrator.
func (w *wiring) buildScaleUp(ctx context.Context) error {
	var quotas scaleup.QuotaSource
	if w.opts.CapacityQuotasEnabled {
		src, err := startCapacityQuotas(ctx, w.informerCtx, w.restConfig, w.recorder)
		if err != nil {
			return err
		}
		quotas = src
		if !w.readOnly {
			w.writeQuotaStatus(src)
		}
	}
	orchestrator, nsFactory, err := buildScaleUp(ctx, w.opts, w.client, w.factory, w.provider, w.listers, w.recorder,
		w.state, w.m, w.reporting, quotas, w.dra)
	if err != nil {
		return err
	}
	w.orchestrator, w.nsFactory = orchestrator, nsFactory
	if w.explain != nil {
		scaleup.WithExplainer(w.explain)(orchestrator)
		w.loopOpts = append(w.loopOpts, core.WithExplainer(w.explain))
	}
	w.loopOpts = append(w.loopOpts, core.WithScaleUp(orchestrator), core.WithEventRecorder(w.recorder),
		core.WithClusterState(w.state))
	return nil
}

// writeQuotaStatus writes the CapacityQuotas' status.used, every period
// once the node informer has listed.
func (w *wiring) writeQuotaStatus(src *capacityquota.Source) {
	nodeInformer := w.factory.Core().V1().Nodes().Informer()
	go func() {
		if !cache.WaitForCacheSync(w.informerCtx.Done(), nodeInformer.HasSynced) {
			return
		}
		wait.UntilWithContext(w.informerCtx, func(ctx context.Context) {
			if nodes, err := w.listers.Nodes.List(labels.Everything()); err == nil {
				src.WriteStatus(ctx, nodes)
			}
		}, capacityQuotaStatusPeriod)
	}()
}

func (w *wiring) buildCleanup() {
	o := w.opts
	w.loopOpts = append(w.loopOpts, core.WithCleanup(cleanup.New(cleanup.Options{
		ForceDeleteUnregistered: o.ForceDeleteUnregisteredNodes,
		ForceDeleteFailed:       o.ForceDeleteFailedNodes,
		MaxDeletionsPerLoop:     o.MaxBrokenNodeDeletionsPerLoop,
		BreakerRatio:            o.UnregisteredBreakerRatio,
		BreakerMinimum:          o.UnregisteredBreakerMinimum,
		DryRun:                  o.DryRunDeletions,
	}, w.provider, w.m, cleanup.WithEvents(w.recorder, w.statusRef))))
}

// buildStatus writes the initial status ConfigMap (when enabled) and removes
// it on a clean exit.
func (w *wiring) buildStatus(ctx, processCtx context.Context) {
	if !w.opts.WriteStatusConfigMap {
		return
	}
	status := &clusterstate.StatusWriter{Client: w.client, Namespace: w.opts.Namespace, Name: w.opts.StatusConfigMapName}
	w.statusWriter = status
	if err := status.WriteInitializing(ctx, time.Now()); err != nil {
		w.logger.Error(err, "Writing the initial status ConfigMap")
	}
	w.onExit(func() {
		// Like upstream, a clean exit removes the status: a stale one
		// would claim an autoscaler that no longer runs. A replica that
		// lost the Lease leaves it alone: the new leader writes it.
		if ctx.Err() != nil && processCtx.Err() == nil {
			w.logger.Info("Lost the lease: leaving the status ConfigMap to the new leader")
			return
		}
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := status.Delete(delCtx); err != nil {
			w.logger.Error(err, "Deleting the status ConfigMap")
		}
	})
	w.loopOpts = append(w.loopOpts, core.WithStatusWriter(status))
}

// buildScaleDown wires scale-down; its removals run on the loop's context:
// whatever ends the loop (lost Lease, shutdown, an error) stops them, and
// they are waited for before the status ConfigMap is dealt with.
func (w *wiring) buildScaleDown(ctx context.Context) {
	w.scaleDown, w.taints = buildScaleDown(w.opts, w.client, w.factory, w.provider, w.recorder, w.m, w.reporting, w.readOnly)
	if w.explain != nil {
		scaledown.WithExplainer(w.explain)(w.scaleDown)
	}
	w.loopOpts = append(w.loopOpts, core.WithScaleDown(w.scaleDown))
	w.loopCtx, w.stopLoop = context.WithCancel(ctx)
	w.onExit(func() { w.stopLoop(); w.scaleDown.Wait() })
}

func (w *wiring) buildProvisioningRequests(ctx context.Context) error {
	if !w.opts.EnableProvisioningRequests {
		return nil
	}
	p, informer, err := buildProvReqProcessor(ctx, w.opts, w.restConfig, w.client, w.factory, w.recorder, w.orchestrator, w.m, w.wrapProvReqs)
	if err != nil {
		return err
	}
	if w.explain != nil {
		processor.WithExplainer(w.explain)(p)
	}
	w.provreqInformer, w.requests = informer, provreqs.New(p, w.state)
	return nil
}

func (w *wiring) buildBuffers(ctx context.Context) error {
	bufs, err := buildBuffers(ctx, w.opts, w.restConfig, w.factory, w.recorder, w.m)
	w.bufs = bufs
	return err
}

// buildProcessors composes the loop's default processors, node healing
// among the repairs when enabled.
func (w *wiring) buildProcessors() error {
	var injector *capacitybuffers.Injector
	if w.bufs != nil {
		injector = w.bufs.injector
	}
	procs := loopProcessors(w.opts, w.factory, w.recorder, w.requests, injector)
	if w.opts.NodeHealingEnabled {
		hopts, err := healingOptions(w.opts)
		if err != nil {
			return err
		}
		healer := healing.New(hopts, w.client, w.provider, w.recorder, w.m.Registerer())
		procs.Repairs = append(procs.Repairs, healer)
		if w.statusWriter != nil {
			w.statusWriter.Sections = healer.StatusSections
		}
		w.logger.Info("Node healing enabled", "policies", healing.PolicyStrings(hopts.Policies), "hooks", len(hopts.Hooks),
			"maxConcurrent", hopts.MaxConcurrent, "dryRun", hopts.DryRun)
	}
	w.loopOpts = append(w.loopOpts, core.WithProcessors(procs))
	return nil
}

func (w *wiring) buildRunner(health *core.HealthCheck, snapshots *core.Snapshotter) *core.Runner {
	if snapshots != nil {
		w.loopOpts = append(w.loopOpts, core.WithSnapshotter(snapshots), core.WithSnapshotObjects(snapshotObjects(w.factory, w.nsFactory, w.opts.Namespace, w.dra != nil)))
	}
	autoscaler := core.NewAutoscaler(w.opts, w.listers, w.provider, w.m, w.loopOpts...)
	return core.NewRunner(autoscaler, w.opts.ScanInterval, health, w.m, core.WithFrequentLoops(w.opts.FrequentLoopsEnabled),
		core.WithPodBatching(w.opts.ScaleUpBatchIdle, w.opts.ScaleUpBatchMax))
}

// watch makes new ProvisioningRequests, buffers, unschedulable pods and
// joining nodes trigger the runner.
func (w *wiring) watch(ctx context.Context, runner *core.Runner) error {
	if w.provreqInformer != nil {
		if _, err := w.provreqInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { runner.Trigger() },
		}); err != nil {
			return fmt.Errorf("watching ProvisioningRequests: %w", err)
		}
		if err := w.syncRequests(ctx); err != nil || ctx.Err() != nil {
			return err
		}
	}
	if w.bufs != nil {
		if err := w.bufs.startInformer(ctx, w.informerCtx, runner); err != nil {
			return err
		}
	}
	opts := w.opts
	replicaSets := w.factory.Apps().V1().ReplicaSets().Lister()
	if _, err := w.factory.Core().V1().Pods().Informer().AddEventHandler(core.UnschedulablePodTrigger(runner, clock.RealClock{},
		opts.AllowedSchedulerNames, opts.BypassedSchedulerNames, func(pod *apiv1.Pod) bool {
			// The default processors count a ReplicaSet larger than the
			// limit in pieces (processors.ReplicaPlans), unless
			// --enable-proactive-scaleup=false.
			return opts.ProactiveScaleupEnabled &&
				processors.CountsWholeReplicaSet(replicaSets, pod, opts.PodInjectionLimit, true)
		})); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	if w.requests != nil {
		if _, err := w.factory.Core().V1().Nodes().Informer().AddEventHandler(
			core.NodeJoinTrigger(runner, w.requests.WaitingForNodes)); err != nil {
			return fmt.Errorf("watching nodes: %w", err)
		}
	}
	return nil
}

// syncRequests runs the ProvisioningRequest informer (when requests are
// enabled) and waits for its cache.
func (w *wiring) syncRequests(ctx context.Context) error {
	if w.provreqInformer == nil {
		return nil
	}
	go w.provreqInformer.RunWithContext(w.informerCtx)
	if !cache.WaitForCacheSync(ctx.Done(), w.provreqInformer.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("syncing the ProvisioningRequest informer cache (is the CRD installed?)")
	}
	return nil
}

// syncInformers starts both factories and waits for their caches; it
// reports false (with nil when ctx ended, else the error) when they did not
// sync.
func (w *wiring) syncInformers(ctx context.Context) (bool, error) {
	for _, f := range []informers.SharedInformerFactory{w.factory, w.nsFactory} {
		f.Start(w.informerCtx.Done())
		w.onExit(func() { w.stopInformers(); f.Shutdown() })
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

// startBufferController runs the buffer controller while the loop does;
// it is waited for.
func (w *wiring) startBufferController() {
	if w.bufs == nil {
		return
	}
	waitController := w.bufs.runController(w.loopCtx)
	w.onExit(func() { w.stopLoop(); waitController() })
}
