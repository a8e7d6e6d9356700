package builder

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/component-base/metrics/prometheus/restclient" // client-go's rest_client_* series, as upstream
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/aws"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/clusterapi"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/leaderlease"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// Start wires the autoscaler from opts and runs it until ctx ends: the
// clients, metrics, health check and HTTP servers once, then Run, under
// leader election when it is on.
func Start(ctx context.Context, opts config.Options) error {
	logger := klog.FromContext(ctx)
	providers := NewProviderRegistry()
	if !slices.Contains(providers.Names(), opts.CloudProvider) {
		return fmt.Errorf("--cloud-provider %q: %w; this build has %v", opts.CloudProvider,
			cloudprovider.ErrUnknownProvider, providers.Names())
	}
	restConfig, err := RESTConfig(opts)
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

	var snapshots *core.Snapshotter
	if opts.DebuggingSnapshotEnabled {
		snapshots = core.NewSnapshotter()
	}
	explainer := newExplainer(opts)
	servers, err := serveHTTP(logger, opts, metricsGatherer(registry), health, snapshots, explainer)
	if err != nil {
		return err
	}
	defer servers.shutdown()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		if err, ok := <-servers.failed(); ok {
			logger.Error(err, "HTTP server failed")
			cancel()
		}
	}()

	act := func(leadCtx context.Context) error {
		return Run(leadCtx, runCtx, Process{Opts: opts, RESTConfig: restConfig, Client: client, Providers: providers,
			Metrics: m, Health: health, Snapshots: snapshots, Explainer: explainer})
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
	le := opts.LeaderElection
	if le.ResourceNamespace != "" && le.ResourceNamespace != opts.Namespace {
		// Upstream ignores this flag too; honouring it would put an
		// upstream replica and this one on different Leases during a
		// rolling swap, and both would act.
		logger.Info("Warning: --leader-elect-resource-namespace is ignored, as upstream: the Lease lives in --namespace",
			"leaderElectResourceNamespace", le.ResourceNamespace, "namespace", opts.Namespace)
	}
	return leaderlease.Run(runCtx, leaderlease.Config{Namespace: opts.Namespace, Name: le.ResourceName,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod},
		leaseClient, NewEventBroadcaster(runCtx, opts), act)
}

// RESTConfig is the API server client configuration of opts: --kubeconfig
// or --kubernetes, else the in-cluster one.
func RESTConfig(opts config.Options) (*rest.Config, error) {
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

// NewProviderRegistry lists the cloud providers this build ships.
func NewProviderRegistry() *cloudprovider.Registry {
	r := cloudprovider.NewRegistry()
	r.Register(clusterapi.Name, clusterapi.Build)
	r.Register(kwok.Name, kwok.Build)
	r.Register(externalgrpc.Name, externalgrpc.Build)
	r.Register(aws.Name, aws.Build)
	return r
}
