package builder

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/heapgovernor"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// Process is what one autoscaler process holds across leaderships: its
// clients, the metrics, health and debugging endpoints' state.
type Process struct {
	Opts       config.Options
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	Providers  *cloudprovider.Registry
	Metrics    *metrics.Metrics
	Health     *core.HealthCheck
	// Snapshots and Explainer are nil unless served.
	Snapshots *core.Snapshotter
	Explainer *explain.Recorder
}

// Run starts the informers once and runs the loop until ctx ends. ctx is
// the lead context (the process context without leader election);
// processCtx ends only when the process is told to stop, so that a lost
// Lease (ctx over, processCtx live) can be told from a shutdown. Each step
// returns what it built; what a step must undo at the end is pushed on a
// stack and undone in reverse order, as defers would be.
func Run(ctx, processCtx context.Context, p Process) error {
	opts, logger := p.Opts, klog.FromContext(ctx)
	stack := &Stack{}
	defer stack.Unwind()
	// Informers stop before the deferred shutdowns wait for them, whatever
	// ends Run (an error, a recovered panic, the end of ctx).
	informerCtx, stopInformers := context.WithCancel(ctx)
	stack.Defer(stopInformers)
	inf := NewInformers(informerCtx, p.Client)
	provider, err := NewProvider(ctx, p.Providers, opts, p.Client, inf, false)
	if err != nil {
		return err
	}
	stack.Defer(func() { CleanUpProvider(ctx, provider) })
	recorder, shutdownEvents, err := NewEventRecorder(ctx, opts, p.RESTConfig, p.Client, false)
	if err != nil {
		return err
	}
	stack.Defer(shutdownEvents)
	loop, loopCtx, err := NewLoop(ctx, informerCtx, Inputs{Opts: opts, RESTConfig: p.RESTConfig, Client: p.Client,
		Metrics: p.Metrics, Informers: inf, Provider: provider, Recorder: recorder, Explainer: p.Explainer,
		LeaseLost: func() bool { return ctx.Err() != nil && processCtx.Err() == nil }}, stack)
	if err != nil {
		return err
	}
	runner := NewRunner(opts, inf, provider, p.Metrics, loop, p.Health, p.Snapshots)
	if err := Watch(ctx, informerCtx, opts, inf, loop, runner); err != nil || ctx.Err() != nil {
		return err
	}
	StartInterruption(ctx, loop, runner)
	if synced, err := SyncInformers(ctx, informerCtx, stack, stopInformers, inf.Factory, loop.NamespaceFactory); !synced {
		return err
	}
	if loop.Buffers != nil {
		// The buffer controller runs while the loop does; it is waited for.
		waitController := loop.Buffers.RunController(loopCtx)
		stack.Defer(func() { loop.Stop(); waitController() })
	}
	CleanStaleTaints(ctx, inf.Listers.Nodes, provider, loop.Taints, recorder)
	logger.Info("Informer caches synced; starting the loop", "scanInterval", opts.ScanInterval)
	p.Health.StartMonitoring()
	return runner.Run(loopCtx)
}

// NewProvider builds the cloud provider opts name, passive when readOnly
// (explain: cloudprovider.BuildOptions.ReadOnly); its caller cleans it up
// (CleanUpProvider) at the end.
func NewProvider(ctx context.Context, providers *cloudprovider.Registry, opts config.Options, client kubernetes.Interface,
	inf *Informers, readOnly bool) (cloudprovider.CloudProvider, error) {
	return providers.Build(ctx, opts.CloudProvider, cloudprovider.BuildOptions{
		Options: ProviderOptions(opts), KubeClient: client, InformerFactory: inf.Factory,
		ResourceLimiter: ResourceLimiter(opts), ReadOnly: readOnly,
	})
}

// CleanUpProvider runs the provider's Cleanup; ctx (the lead context) may be
// over, so the provider gets a moment of its own.
func CleanUpProvider(ctx context.Context, provider cloudprovider.CloudProvider) {
	cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := provider.Cleanup(cleanupCtx); err != nil {
		klog.FromContext(ctx).Error(err, "Cloud provider cleanup failed")
	}
}

// NewRunner is the loop (core.Autoscaler with loop's options, and the
// snapshot's when snapshots is set) under its trigger.
func NewRunner(opts config.Options, inf *Informers, provider cloudprovider.CloudProvider, m *metrics.Metrics, loop *Loop,
	health *core.HealthCheck, snapshots *core.Snapshotter) *core.Runner {
	loopOpts := loop.Options
	if snapshots != nil {
		loopOpts = append(loopOpts, core.WithSnapshotter(snapshots),
			core.WithSnapshotObjects(SnapshotObjects(inf.Factory, loop.NamespaceFactory, opts.Namespace, loop.DRA != nil)))
	}
	autoscaler := core.NewAutoscaler(CoreOptions(opts), inf.Listers, provider, m, loopOpts...)
	return core.NewRunner(autoscaler, opts.ScanInterval, health, m, core.WithFrequentLoops(opts.FrequentLoopsEnabled),
		core.WithPodBatching(opts.ScaleUpBatchIdle, opts.ScaleUpBatchMax), core.WithClock(loop.Clock),
		core.WithBetweenLoops(BetweenLoops()))
}

// BetweenLoops is what the runner does at the start of each wait between two
// loops: the idle collector runs the Go collector there when the next loop
// would otherwise run it (heapgovernor.IdleCollector), so that marking the
// informers' objects does not stretch a loop. BenchmarkLoop calls it between
// its loops as the runner does.
func BetweenLoops() func(ctx context.Context, wait time.Duration) {
	c := heapgovernor.NewIdleCollector()
	return func(ctx context.Context, wait time.Duration) { c.BetweenLoops(ctx, wait) }
}

// Watch makes new ProvisioningRequests, buffers, unschedulable pods and
// joining nodes trigger the runner; it runs the ProvisioningRequest and
// buffer informers on informerCtx and waits for their caches.
func Watch(ctx, informerCtx context.Context, opts config.Options, inf *Informers, loop *Loop, runner core.LoopTrigger) error {
	if loop.ProvReqInformer != nil {
		if _, err := loop.ProvReqInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { runner.Trigger() },
		}); err != nil {
			return fmt.Errorf("watching ProvisioningRequests: %w", err)
		}
		if err := SyncRequests(ctx, informerCtx, loop.ProvReqInformer); err != nil || ctx.Err() != nil {
			return err
		}
	}
	if loop.Buffers != nil {
		if err := loop.Buffers.StartInformer(ctx, informerCtx, runner); err != nil {
			return err
		}
	}
	replicaSets := inf.Factory.Apps().V1().ReplicaSets().Lister()
	if _, err := inf.Factory.Core().V1().Pods().Informer().AddEventHandler(core.UnschedulablePodTrigger(runner, loop.Clock,
		opts.AllowedSchedulerNames, opts.BypassedSchedulerNames, func(pod *apiv1.Pod) bool {
			// The default processors count a ReplicaSet larger than the
			// limit in pieces (processors.ReplicaPlans), unless
			// --enable-proactive-scaleup=false.
			return opts.ProactiveScaleupEnabled &&
				processors.CountsWholeReplicaSet(replicaSets, pod, opts.PodInjectionLimit, true)
		})); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	if loop.Requests != nil {
		if _, err := inf.Factory.Core().V1().Nodes().Informer().AddEventHandler(
			core.NodeJoinTrigger(runner, loop.Requests.WaitingForNodes)); err != nil {
			return fmt.Errorf("watching nodes: %w", err)
		}
	}
	return nil
}
