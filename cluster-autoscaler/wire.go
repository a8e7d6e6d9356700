package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/restclient" // client-go's rest_client_* series, as upstream
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	"k8s.io/autoscaler/cluster-autoscaler/cleanup"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/aws"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/clusterapi"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	grpcexpander "k8s.io/autoscaler/cluster-autoscaler/expander/grpc"
	"k8s.io/autoscaler/cluster-autoscaler/healing"
	"k8s.io/autoscaler/cluster-autoscaler/leaderlease"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/processors/capacitybuffers"
	"k8s.io/autoscaler/cluster-autoscaler/processors/provreqs"
	provreqv1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	provreqclient "k8s.io/autoscaler/cluster-autoscaler/provreq/client"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
	simframework "k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// errLostLease ends the process when another replica took the lease.
var errLostLease = errors.New("lost the leader-election lease")

// start wires the autoscaler from opts and runs it until ctx ends.
func start(ctx context.Context, opts config.Options) error {
	logger := klog.FromContext(ctx)
	providers := newProviderRegistry()
	if !slices.Contains(providers.Names(), opts.CloudProvider) {
		return fmt.Errorf("--cloud-provider %q: %w; this build has %v", opts.CloudProvider,
			cloudprovider.ErrUnknownProvider, providers.Names())
	}
	restConfig, err := buildRESTConfig(opts)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}

	registry := prometheus.NewRegistry()
	m := metrics.New(registry)
	health := core.NewHealthCheck(clock.RealClock{}, opts.MaxInactivity, opts.MaxFailingTime, opts.MaxStartupTime)

	listener, err := net.Listen("tcp", opts.Address)
	if err != nil {
		return fmt.Errorf("--address %q: %w", opts.Address, err)
	}
	var snapshots *core.Snapshotter
	if opts.DebuggingSnapshotEnabled {
		snapshots = core.NewSnapshotter()
	}
	server := &http.Server{Handler: newMux(metricsGatherer(registry), health, opts.Profiling, snapshots), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(listener) }()
	logger.Info("Serving metrics and health", "address", listener.Addr().String())
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
	}()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "HTTP server failed")
			cancel()
		}
	}()

	act := func(leadCtx context.Context) error {
		return runAutoscaler(leadCtx, runCtx, opts, restConfig, client, providers, m, health, snapshots)
	}
	if !opts.LeaderElection.Enabled {
		return act(runCtx)
	}
	// The Lease is renewed through a client of its own, so that a renewal
	// never waits in the rate limiter (--kube-client-qps) behind the loop's
	// and the provider's requests (BenchmarkScale at 3,000 nodes once lost
	// the lease with "client rate limiter Wait returned an error").
	leaseClient, err := kubernetes.NewForConfig(rest.CopyConfig(restConfig))
	if err != nil {
		return fmt.Errorf("building the leader-election client: %w", err)
	}
	return runWithLeaderElection(runCtx, opts, leaseClient, act)
}

func buildRESTConfig(opts config.Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if opts.Kubeconfig != "" || opts.KubernetesURL != "" {
		cfg, err = clientcmd.BuildConfigFromFlags(opts.KubernetesURL, opts.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("building the API server client configuration (--kubeconfig %q): %w", opts.Kubeconfig, err)
	}
	cfg.QPS = float32(opts.KubeClientQPS)
	cfg.Burst = opts.KubeClientBurst
	cfg.ContentType = opts.KubeAPIContentType
	cfg.UserAgent = opts.UserAgent
	return cfg, nil
}

// newProviderRegistry lists the cloud providers this build ships.
func newProviderRegistry() *cloudprovider.Registry {
	r := cloudprovider.NewRegistry()
	r.Register(clusterapi.Name, clusterapi.Build)
	r.Register(kwok.Name, kwok.Build)
	r.Register(externalgrpc.Name, externalgrpc.Build)
	r.Register(aws.Name, aws.Build)
	return r
}

// metricsGatherer serves the autoscaler's own series (registry) with
// component-base's legacy registry, as upstream does: the Go runtime and
// process collectors, component-base's own series and client-go's
// rest_client_* series, which client-go can only report to one process-wide
// sink (package restclient registers it at import).
func metricsGatherer(registry *prometheus.Registry) prometheus.Gatherer {
	return prometheus.Gatherers{registry, legacyregistry.DefaultGatherer}
}

func newMux(gatherer prometheus.Gatherer, health http.Handler, profiling bool, snapshots *core.Snapshotter) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.Handle("/health-check", health)
	if snapshots != nil {
		mux.Handle("/snapshotz", snapshots)
	}
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// runWithLeaderElection runs act while this replica holds the Lease. It
// returns nil when ctx ends (releasing the Lease) and errLostLease when the
// Lease was lost while ctx was still live.
func runWithLeaderElection(ctx context.Context, opts config.Options, client kubernetes.Interface,
	act func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	// Fail early on a client that cannot reach the API server, as upstream does.
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("checking the API server connection: %w", err)
	}
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("reading the hostname for the leader-election identity: %w", err)
	}
	identity := hostname + "_" + uuid.NewString()
	le := opts.LeaderElection
	if le.ResourceNamespace != "" && le.ResourceNamespace != opts.Namespace {
		// Upstream ignores this flag too; honouring it would put an
		// upstream replica and this one on different Leases during a
		// rolling swap, and both would act.
		klog.FromContext(ctx).Info("Warning: --leader-elect-resource-namespace is ignored, as upstream: the Lease lives in --namespace",
			"leaderElectResourceNamespace", le.ResourceNamespace, "namespace", opts.Namespace)
	}
	// The election records upstream's LeaderElection events ("... became
	// leader") on the lock object.
	broadcaster := newEventBroadcaster(ctx, opts)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	electionEvents := broadcaster.NewRecorder(clientgoscheme.Scheme, apiv1.EventSource{Component: "cluster-autoscaler", Host: hostname})
	lock, err := resourcelock.New(le.ResourceLock, opts.Namespace, le.ResourceName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: electionEvents})
	if err != nil {
		return fmt.Errorf("building the leader-election lock: %w", err)
	}

	// The elector calls OnStartedLeading in a goroutine of its own; the lead
	// context reaches this goroutine through leadCh so that act runs here and
	// is known to have finished before this function returns.
	leadCh := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) { leadCh <- leadCtx },
			OnStoppedLeading: func() {
				logger.Info("Stopped leading", "lease", klog.KRef(opts.Namespace, le.ResourceName), "identity", identity)
			},
			OnNewLeader: func(current string) {
				if current != identity {
					logger.Info("Another replica holds the lease; waiting", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("building the leader elector: %w", err)
	}
	logger.Info("Waiting for the leader-election lease", "lease", klog.KRef(opts.Namespace, le.ResourceName), "identity", identity)
	// The elector runs on a context of its own, ended when ctx ends or act
	// returns: a start-up error (a missing CRD, a bad configuration) then
	// releases the Lease at once and the process exits non-zero, instead of
	// holding the Lease, and a healthy-looking /health-check, forever.
	electCtx, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electCtx) // returns when electCtx ends (releasing the lease) or the lease is lost
	}()

	select {
	case leadCtx := <-leadCh:
		logger.Info("Acquired the leader-election lease", "lease", klog.KRef(opts.Namespace, le.ResourceName), "identity", identity)
		err := act(leadCtx) // leadCtx ends when the lease is lost or ctx ends
		lost := leadCtx.Err() != nil && ctx.Err() == nil
		stopElecting()
		<-electorDone
		// The elector's own release can lose a race with a renewal cancelled
		// in flight; the Lease is read again and cleared while it is ours.
		released, rerr := leaderlease.Release(context.WithoutCancel(ctx), lock, identity, le.RenewDeadline, clock.RealClock{})
		if rerr != nil {
			logger.Error(rerr, "The leader-election lease may stay held until it expires", "lease", klog.KRef(opts.Namespace, le.ResourceName))
		} else if released == leaderlease.Cleared {
			logger.V(2).Info("Cleared the holder of the leader-election lease", "lease", klog.KRef(opts.Namespace, le.ResourceName))
		}
		switch {
		case err != nil && lost:
			return fmt.Errorf("%w: %w", errLostLease, err)
		case err != nil:
			logger.Info("Released the leader-election lease after an error", "lease", klog.KRef(opts.Namespace, le.ResourceName))
			return err
		}
	case <-electorDone:
	}
	if ctx.Err() == nil {
		return errLostLease
	}
	return nil
}

// runAutoscaler starts the informers once and runs the loop until ctx ends.
// ctx is the lead context (the process context without leader election);
// processCtx ends only when the process is told to stop, so that a lost
// Lease (ctx over, processCtx live) can be told from a shutdown.
func runAutoscaler(ctx, processCtx context.Context, opts config.Options, restConfig *rest.Config, client kubernetes.Interface,
	providers *cloudprovider.Registry, m *metrics.Metrics, health *core.HealthCheck, snapshots *core.Snapshotter) error {
	logger := klog.FromContext(ctx)
	// Informers stop before the deferred shutdowns wait for them, whatever
	// ends this function (an error, a recovered panic, the end of ctx).
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	trim := newCacheTrimmer()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim.transform))
	go trim.run(informerCtx, factory.Core().V1().Pods().Informer())
	listers := core.Listers{
		Nodes: factory.Core().V1().Nodes().Lister(),
		Pods:  factory.Core().V1().Pods().Lister(),
	}
	provider, err := providers.Build(ctx, opts.CloudProvider, cloudprovider.BuildOptions{
		Options: opts, KubeClient: client, InformerFactory: factory,
		ResourceLimiter: cloudprovider.ResourceLimiterFromOptions(opts),
	})
	if err != nil {
		return err
	}
	defer func() {
		// The lead context is over; give the provider a moment of its own.
		cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := provider.Cleanup(cleanupCtx); err != nil {
			logger.Error(err, "Cloud provider cleanup failed")
		}
	}()
	// Events get a client of their own, so that a burst of them does not
	// hold up status writes and cloud actions behind one rate limiter.
	eventsClient, err := kubernetes.NewForConfig(rest.CopyConfig(restConfig))
	if err != nil {
		return fmt.Errorf("building the events client: %w", err)
	}
	broadcaster := newEventBroadcaster(ctx, opts)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventsClient.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(clientgoscheme.Scheme, apiv1.EventSource{Component: "cluster-autoscaler"})
	state := clusterstate.NewRegistry(opts)
	statusRef := &apiv1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: opts.Namespace, Name: opts.StatusConfigMapName}
	// Cluster-level events go to the status ConfigMap only when it is
	// written, as upstream.
	var clusterEvents *apiv1.ObjectReference
	if opts.WriteStatusConfigMap {
		clusterEvents = statusRef
	}
	reporting := core.NewReporting(m, provider, recorder, clusterEvents)
	var quotas scaleup.QuotaSource
	if opts.CapacityQuotasEnabled {
		src, err := startCapacityQuotas(ctx, informerCtx, restConfig, recorder)
		if err != nil {
			return err
		}
		quotas = src
		// status.used, every period once the node informer has listed.
		nodeInformer := factory.Core().V1().Nodes().Informer()
		go func() {
			if !cache.WaitForCacheSync(informerCtx.Done(), nodeInformer.HasSynced) {
				return
			}
			wait.UntilWithContext(informerCtx, func(ctx context.Context) {
				if nodes, err := listers.Nodes.List(labels.Everything()); err == nil {
					src.WriteStatus(ctx, nodes)
				}
			}, capacityQuotaStatusPeriod)
		}()
	}
	orchestrator, nsFactory, err := buildScaleUp(ctx, opts, client, factory, provider, listers, recorder, state, m, reporting, quotas)
	if err != nil {
		return err
	}
	loopOpts := []core.AutoscalerOption{core.WithScaleUp(orchestrator), core.WithEventRecorder(recorder),
		core.WithClusterState(state)}
	loopOpts = append(loopOpts, core.WithCleanup(cleanup.New(cleanup.Options{
		ForceDeleteUnregistered: opts.ForceDeleteUnregisteredNodes,
		ForceDeleteFailed:       opts.ForceDeleteFailedNodes,
		MaxDeletionsPerLoop:     opts.MaxBrokenNodeDeletionsPerLoop,
		BreakerRatio:            opts.UnregisteredBreakerRatio,
		BreakerMinimum:          opts.UnregisteredBreakerMinimum,
		DryRun:                  opts.DryRunDeletions,
	}, provider, m, cleanup.WithEvents(recorder, statusRef))))
	var statusWriter *clusterstate.StatusWriter
	if opts.WriteStatusConfigMap {
		status := &clusterstate.StatusWriter{Client: client, Namespace: opts.Namespace, Name: opts.StatusConfigMapName}
		statusWriter = status
		if err := status.WriteInitializing(ctx, time.Now()); err != nil {
			logger.Error(err, "Writing the initial status ConfigMap")
		}
		defer func() {
			// Like upstream, a clean exit removes the status: a stale one
			// would claim an autoscaler that no longer runs. A replica that
			// lost the Lease leaves it alone: the new leader writes it.
			if ctx.Err() != nil && processCtx.Err() == nil {
				logger.Info("Lost the lease: leaving the status ConfigMap to the new leader")
				return
			}
			delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := status.Delete(delCtx); err != nil {
				logger.Error(err, "Deleting the status ConfigMap")
			}
		}()
		loopOpts = append(loopOpts, core.WithStatusWriter(status))
	}
	sd, taints := buildScaleDown(opts, client, factory, provider, recorder, m, reporting)
	loopOpts = append(loopOpts, core.WithScaleDown(sd))
	// Scale-down's removals run on the loop's context: whatever ends the
	// loop (lost Lease, shutdown, an error) stops them, and they are waited
	// for before the status ConfigMap is dealt with.
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer func() { stopLoop(); sd.Wait() }()
	var provreqInformer cache.SharedIndexInformer
	var requests *provreqs.Requests
	if opts.EnableProvisioningRequests {
		var p *processor.Processor
		p, provreqInformer, err = buildProvReqProcessor(ctx, opts, restConfig, client, factory, recorder, orchestrator, m)
		if err != nil {
			return err
		}
		requests = provreqs.New(p, state)
	}
	bufs, err := buildBuffers(ctx, opts, restConfig, factory, recorder, m)
	if err != nil {
		return err
	}
	var injector *capacitybuffers.Injector
	if bufs != nil {
		injector = bufs.injector
	}
	procs := loopProcessors(opts, factory, recorder, requests, injector)
	if opts.NodeHealingEnabled {
		hopts, err := healingOptions(opts)
		if err != nil {
			return err
		}
		healer := healing.New(hopts, client, provider, recorder, m.Registerer())
		procs.Repairs = append(procs.Repairs, healer)
		if statusWriter != nil {
			statusWriter.Sections = healer.StatusSections
		}
		logger.Info("Node healing enabled", "policies", healing.PolicyStrings(hopts.Policies), "hooks", len(hopts.Hooks),
			"maxConcurrent", hopts.MaxConcurrent, "dryRun", hopts.DryRun)
	}
	loopOpts = append(loopOpts, core.WithProcessors(procs))
	if snapshots != nil {
		loopOpts = append(loopOpts, core.WithSnapshotter(snapshots))
	}
	autoscaler := core.NewAutoscaler(opts, listers, provider, m, loopOpts...)
	runner := core.NewRunner(autoscaler, opts.ScanInterval, health, m, core.WithFrequentLoops(opts.FrequentLoopsEnabled),
		core.WithPodBatching(opts.ScaleUpBatchIdle, opts.ScaleUpBatchMax))
	if provreqInformer != nil {
		if _, err := provreqInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { runner.Trigger() },
		}); err != nil {
			return fmt.Errorf("watching ProvisioningRequests: %w", err)
		}
		go provreqInformer.RunWithContext(informerCtx)
		if !cache.WaitForCacheSync(ctx.Done(), provreqInformer.HasSynced) {
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("syncing the ProvisioningRequest informer cache (is the CRD installed?)")
		}
	}
	if bufs != nil {
		if err := bufs.startInformer(ctx, informerCtx, runner); err != nil {
			return err
		}
	}
	replicaSets := factory.Apps().V1().ReplicaSets().Lister()
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(unschedulablePodTrigger(runner,
		opts.AllowedSchedulerNames, opts.BypassedSchedulerNames, func(pod *apiv1.Pod) bool {
			// The default processors count a ReplicaSet larger than the
			// limit in pieces (processors.ReplicaPlans).
			return processors.CountsWholeReplicaSet(replicaSets, pod, opts.PodInjectionLimit, true)
		})); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	if requests != nil {
		if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(
			nodeJoinTrigger(runner, requests.WaitingForNodes)); err != nil {
			return fmt.Errorf("watching nodes: %w", err)
		}
	}

	for _, f := range []informers.SharedInformerFactory{factory, nsFactory} {
		f.Start(informerCtx.Done())
		defer func() { stopInformers(); f.Shutdown() }()
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("syncing the %v informer cache", typ)
			}
		}
	}
	if bufs != nil {
		// The controller runs while the loop does, and is waited for.
		waitController := bufs.runController(loopCtx)
		defer func() { stopLoop(); waitController() }()
	}
	cleanStaleTaints(ctx, listers.Nodes, provider, taints)
	logger.Info("Informer caches synced; starting the loop", "scanInterval", opts.ScanInterval)
	health.StartMonitoring()
	return runner.Run(loopCtx)
}

// newEventBroadcaster builds the events' broadcaster as upstream does.
// Unless --record-duplicated-events, client-go's spam filter lets through
// one event per reason and object (any type, any message) and refills once
// per five minutes, remembering 8192 keys; events on the status ConfigMap
// are told apart by their message only, so that each distinct cluster-level
// event is recorded. (Upstream recognises the status ConfigMap only under its
// default name in kube-system; here it is --status-config-map-name in
// --namespace.) With --record-duplicated-events client-go's defaults apply.
func newEventBroadcaster(ctx context.Context, opts config.Options) record.EventBroadcaster {
	if opts.RecordDuplicatedEvents {
		return record.NewBroadcaster(record.WithContext(ctx))
	}
	return record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		QPS: 1. / 300., BurstSize: 1, LRUCacheSize: 8192,
		SpamKeyFunc: spamKey(opts.Namespace, opts.StatusConfigMapName)}))
}

// spamKey is the spam filter's key of an event: see newEventBroadcaster.
func spamKey(statusNamespace, statusName string) record.EventSpamKeyFunc {
	return func(ev *apiv1.Event) string {
		o := ev.InvolvedObject
		if o.Kind == "ConfigMap" && o.Namespace == statusNamespace && o.Name == statusName {
			return ev.Message
		}
		return strings.Join([]string{ev.Reason, ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name,
			string(o.UID), o.APIVersion}, "")
	}
}

// unschedulablePodTrigger asks for a loop when the scheduler newly marks a pod
// unschedulable, or a pod of a bypassed scheduler arrives; the runner
// batches a burst of them into one loop. Pods of schedulers outside
// --allowed-scheduler-names ask for nothing. A new pod for which counted is
// true (its workload's later pods are counted in full by the loop) does not
// extend a batch its workload is already in.
func unschedulablePodTrigger(r *core.Runner, allowed, bypassed []string, counted func(*apiv1.Pod) bool) cache.ResourceEventHandler {
	check := func(obj any) {
		pod, ok := obj.(*apiv1.Pod)
		if !ok || len(processors.OfAllowedSchedulers([]*apiv1.Pod{pod}, allowed)) == 0 {
			return
		}
		if (processors.IsUnschedulable(pod) && recentlyUnschedulable(pod, time.Now())) ||
			processors.IsUnprocessedByBypassed(pod, bypassed) {
			r.PodTrigger(core.WorkloadKey(pod))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*apiv1.Pod); ok && pod.Spec.NodeName == "" && pod.Status.Phase == apiv1.PodPending &&
				len(processors.OfAllowedSchedulers([]*apiv1.Pod{pod}, allowed)) > 0 {
				r.PodArrived(core.WorkloadKey(pod), counted(pod))
			}
			check(obj)
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*apiv1.Pod); ok && processors.IsUnschedulable(pod) {
				check(obj)
			}
		},
	}
}

// nodeJoinTrigger asks for a loop when a node registers or turns Ready
// while an all-or-nothing ProvisioningRequest waits for its nodes, so that
// the request is Provisioned within a loop's time of its last node, not a
// scan interval later. Heartbeats and other node updates start nothing.
func nodeJoinTrigger(r *core.Runner, waiting func() bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			if _, ok := obj.(*apiv1.Node); ok && !initialList && waiting() {
				r.Trigger()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*apiv1.Node)
			node, ok2 := newObj.(*apiv1.Node)
			if ok1 && ok2 && !nodeIsReady(old) && nodeIsReady(node) && waiting() {
				r.Trigger()
			}
		},
	}
}

func nodeIsReady(n *apiv1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == apiv1.NodeReady {
			return c.Status == apiv1.ConditionTrue
		}
	}
	return false
}

// recentlyUnschedulable reports whether pod became unschedulable within the
// last ten seconds, so that the scheduler's periodic retries of old pending
// pods do not keep the loop spinning.
func recentlyUnschedulable(pod *apiv1.Pod, now time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == apiv1.PodScheduled {
			return now.Sub(c.LastTransitionTime.Time) < 10*time.Second
		}
	}
	return false
}

// buildScaleUp wires the simulator, estimator, expander chain and
// orchestrator. The returned namespaced factory feeds the priority expander's
// ConfigMap lister and must be started with the cluster-wide one.
func buildScaleUp(ctx context.Context, opts config.Options, client kubernetes.Interface, factory informers.SharedInformerFactory,
	provider cloudprovider.CloudProvider, listers core.Listers, recorder record.EventRecorder,
	state *clusterstate.Registry, m *metrics.Metrics, reporting *core.Reporting, quotas scaleup.QuotaSource) (*scaleup.Orchestrator, informers.SharedInformerFactory, error) {
	simOpts := []simframework.Option{simframework.WithParallelism(opts.PredicateParallelism), simframework.WithClient(client),
		simframework.WithVerbosity(opts.SchedulerVerbosity)}
	if opts.SchedulerConfigFile != "" {
		simOpts = append(simOpts, simframework.WithSchedulerConfigFile(opts.SchedulerConfigFile))
	}
	sim, err := simframework.New(ctx, simframework.NewSnapshot(nil, nil), factory, simOpts...)
	if err != nil {
		return nil, nil, err
	}
	nsFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(opts.Namespace),
		informers.WithTransform(newCacheTrimmer().transform))
	chain, err := expander.NewChain(ctx, opts.Expanders, expander.Deps{
		Provider:   provider,
		ConfigMaps: nsFactory.Core().V1().ConfigMaps().Lister().ConfigMaps(opts.Namespace),
		Recorder:   recorder,
		Namespace:  opts.Namespace,
		Nodes:      listers.Nodes,
		GRPC: func(fallback expander.Filter) (expander.Filter, error) {
			return grpcexpander.New(grpcexpander.Options{URL: opts.GRPCExpanderURL, CertFile: opts.GRPCExpanderCert,
				Timeout: opts.GRPCExpanderTimeout}, fallback, m)
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("--expander: %w", err)
	}
	suOpts := []scaleup.Option{scaleup.WithDaemonSets(factory.Apps().V1().DaemonSets().Lister()),
		scaleup.WithDeletionCounter(m.RegisterDeletedNodes), scaleup.WithReporter(reporting)}
	if quotas != nil {
		suOpts = append(suOpts, scaleup.WithCapacityQuotas(quotas))
	}
	return scaleup.New(provider, sim, estimator.New(sim), chain, opts, state, suOpts...), nsFactory, nil
}

// capacityQuotaStatusPeriod is how often CapacityQuotas' status.used is
// brought up to date.
const capacityQuotaStatusPeriod = 10 * time.Second

// startCapacityQuotas checks that CapacityQuotas are served (a clear
// start-up error otherwise), starts their informer on informerCtx and waits
// for its first list, so that no scale-up runs before the quotas are known.
func startCapacityQuotas(ctx, informerCtx context.Context, restConfig *rest.Config, recorder record.EventRecorder) (*capacityquota.Source, error) {
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("--capacity-quotas-enabled: building the dynamic client: %w", err)
	}
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := capacityquota.Check(checkCtx, dyn); err != nil {
		return nil, fmt.Errorf("--capacity-quotas-enabled: %w", err)
	}
	src := capacityquota.NewSource(dyn, recorder)
	go src.Run(informerCtx)
	if !cache.WaitForCacheSync(ctx.Done(), src.HasSynced) {
		return nil, errors.New("--capacity-quotas-enabled: syncing the CapacityQuota informer cache")
	}
	klog.FromContext(ctx).Info("CapacityQuotas limit scale-up", "quotas", len(src.Quotas(ctx)))
	return src, nil
}

// buildProvReqProcessor wires the ProvisioningRequest processor: its typed
// client, informer (started by the caller), PodTemplate lister, status
// writer, the orchestrator's rollback and the ConfigMap that records the
// all-or-nothing attempts in flight for the next leader.
func buildProvReqProcessor(ctx context.Context, opts config.Options, restConfig *rest.Config, client kubernetes.Interface,
	factory informers.SharedInformerFactory, recorder record.EventRecorder, orchestrator *scaleup.Orchestrator,
	m *metrics.Metrics) (*processor.Processor, cache.SharedIndexInformer, error) {
	c, err := provreqclient.NewForConfig(restConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("building the ProvisioningRequest client: %w", err)
	}
	// Fail at start-up, with a clear message, when the CRD is not served:
	// the informer would otherwise retry forever and the loop never start.
	listCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.ProvisioningRequests("").List(listCtx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("--enable-provisioning-requests: the ProvisioningRequest CRD (provisioningrequests.autoscaling.x-k8s.io, v1) is not installed: %w", err)
		}
		return nil, nil, fmt.Errorf("--enable-provisioning-requests: listing ProvisioningRequests: %w", err)
	}
	informer := provreqclient.NewInformer(c, "", time.Hour)
	p := processor.New(processor.Options{
		BookingTime:             opts.ProvReqBookingTime,
		TemplateGracePeriod:     opts.ProvReqTemplateGracePeriod,
		ExpiryTime:              opts.ProvReqExpiryTime,
		RetentionTime:           opts.ProvReqRetentionTime,
		InitialBackoff:          opts.ProvReqInitialBackoff,
		MaxBackoff:              opts.ProvReqMaxBackoff,
		MaxBackoffEntries:       opts.ProvReqMaxBackoffCacheSize,
		ProcessorInstance:       opts.CheckCapacityProcessorInstance,
		CheckCapacityTimebox:    opts.CheckCapacityBatchTimebox,
		CheckCapacityMaxPerLoop: checkCapacityCap(opts),
		MaxNodeProvisionTime:    opts.NodeGroupDefaults.MaxNodeProvisionTime,
		MaxNodeStartupTime:      opts.NodeGroupDefaults.MaxNodeStartupTime,
		MaxPodsPerRequest:       opts.ProvReqMaxPods,
	}, provreqclient.NewLister(informer.GetIndexer()), podTemplates{factory.Core().V1().PodTemplates().Lister()},
		provreqStatus{c}, orchestrator.Rollback, processor.WithEventRecorder(recorder), processor.WithMetrics(m),
		processor.WithRecordStore(provreqclient.NewConfigMapRecords(client, opts.Namespace, processor.RecordsConfigMap)))
	return p, informer, nil
}

// checkCapacityCap is how many check-capacity requests one loop answers:
// --check-capacity-provisioning-request-max-batch-size with
// --check-capacity-batch-processing, as upstream; without it, no cap (every
// eligible request within the timebox, where upstream answers one per loop).
func checkCapacityCap(opts config.Options) int {
	if !opts.CheckCapacityBatchProcessing {
		return 0
	}
	return opts.CheckCapacityMaxBatchSize
}

// podTemplates reads PodTemplates from the informer cache.
type podTemplates struct{ lister corelisters.PodTemplateLister }

func (t podTemplates) Get(namespace, name string) (*apiv1.PodTemplate, error) {
	return t.lister.PodTemplates(namespace).Get(name)
}

// provreqStatus writes request statuses by server-side apply as the
// autoscaler's field manager, and deletes requests by UID.
type provreqStatus struct{ c *provreqclient.Client }

func (s provreqStatus) ApplyStatus(ctx context.Context, namespace, name string, status provreqv1.ProvisioningRequestStatus) error {
	_, err := s.c.ProvisioningRequests(namespace).ApplyStatus(ctx, name, status,
		metav1.ApplyOptions{FieldManager: "cluster-autoscaler", Force: true})
	return err
}

func (s provreqStatus) Delete(ctx context.Context, namespace, name string, uid types.UID) error {
	return s.c.ProvisioningRequests(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

// buildScaleDown wires the planner (with the drain rules on informer
// listers) and the actuator.
func buildScaleDown(opts config.Options, client kubernetes.Interface, factory informers.SharedInformerFactory,
	provider cloudprovider.CloudProvider, recorder record.EventRecorder, m *metrics.Metrics,
	reporting *core.Reporting) (*scaledown.ScaleDown, *scaledown.Taints) {
	rules := drain.NewRules(drain.Options{
		SkipNodesWithSystemPods:            opts.SkipNodesWithSystemPods,
		SkipNodesWithLocalStorage:          opts.SkipNodesWithLocalStorage,
		SkipNodesWithCustomControllerPods:  opts.SkipNodesWithCustomControllerPods,
		MinReplicaCount:                    opts.MinReplicaCount,
		BlockingSystemPodDisruptionTimeout: opts.BlockingSystemPodDisruptionTimeout,
		MaxGracefulTerminationSec:          maxGraceSec(opts),
	}, drain.Listers{
		ReplicationControllers: factory.Core().V1().ReplicationControllers().Lister(),
		ReplicaSets:            factory.Apps().V1().ReplicaSets().Lister(),
		StatefulSets:           factory.Apps().V1().StatefulSets().Lister(),
		DaemonSets:             factory.Apps().V1().DaemonSets().Lister(),
		Jobs:                   factory.Batch().V1().Jobs().Lister(),
		PodDisruptionBudgets:   factory.Policy().V1().PodDisruptionBudgets().Lister(),
	})
	taints := scaledown.NewTaints(client, opts.MaxBulkSoftTaintCount, opts.CordonNodeBeforeTerminating,
		scaledown.WithSoftTaintTime(opts.MaxBulkSoftTaintTime, clock.RealClock{}))
	planner := scaledown.NewPlanner(opts, provider, rules, taints)
	var actOpts []scaledown.ActuatorOption
	if opts.DynamicNodeDeleteDelayAfterTaint {
		actOpts = append(actOpts, scaledown.WithDynamicDeleteDelay(factory.Core().V1().Nodes().Lister()))
	}
	actuator := scaledown.NewActuator(opts, client, taints, recorder, reporting, clock.RealClock{}, actOpts...)
	return scaledown.New(opts, planner, actuator, m), taints
}

// maxGraceSec is the longest grace period the actuator gives an evicted
// pod: --max-graceful-termination-sec, or the longest of
// --drain-priority-config's.
func maxGraceSec(opts config.Options) int {
	prios, err := config.ParseDrainPriorityConfig(opts.DrainPriorityConfig)
	if opts.DrainPriorityConfig == "" || err != nil {
		return opts.MaxGracefulTerminationSec
	}
	longest := int64(0)
	for _, p := range prios {
		longest = max(longest, p.TerminationGracePeriodSecs)
	}
	return int(min(longest, int64(math.MaxInt32)))
}

// cleanStaleTaints removes, once at start-up, the deletion taints a
// previous run left on nodes of the managed groups (but on those the cloud
// provider is deleting).
func cleanStaleTaints(ctx context.Context, nodes corelisters.NodeLister, provider cloudprovider.CloudProvider, taints *scaledown.Taints) {
	all, err := nodes.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing nodes to clean stale deletion taints")
		return
	}
	taints.CleanUp(ctx, scaledown.LeftToBeDeleted(ctx, provider, all))
}
