package builder

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	grpcexpander "k8s.io/autoscaler/cluster-autoscaler/expander/grpc"
	"k8s.io/autoscaler/cluster-autoscaler/informercache"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	simframework "k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// ScaleUpInputs are what the scale-up orchestrator is wired from.
type ScaleUpInputs struct {
	Opts      config.Options
	Client    kubernetes.Interface
	Informers *Informers
	Provider  cloudprovider.CloudProvider
	Recorder  record.EventRecorder
	State     *clusterstate.Registry
	Metrics   *metrics.Metrics
	Reporting *core.Reporting
	// Quotas is nil unless --capacity-quotas-enabled.
	Quotas scaleup.QuotaSource
	// DRA is nil when the cluster does not serve resource.k8s.io/v1.
	DRA simframework.DRASource
}

// NewScaleUp wires the simulator, estimator, expander chain and
// orchestrator. The returned namespaced factory feeds the priority expander's
// ConfigMap lister and must be started with the cluster-wide one.
func NewScaleUp(ctx context.Context, in ScaleUpInputs) (*scaleup.Orchestrator, informers.SharedInformerFactory, error) {
	opts, client, factory, provider, listers := in.Opts, in.Client, in.Informers.Factory, in.Provider, in.Informers.Listers
	recorder, state, m, reporting, quotas, dra := in.Recorder, in.State, in.Metrics, in.Reporting, in.Quotas, in.DRA
	simOpts := []simframework.Option{simframework.WithParallelism(opts.PredicateParallelism), simframework.WithClient(client),
		simframework.WithVerbosity(opts.SchedulerVerbosity)}
	if opts.SchedulerConfigFile != "" {
		simOpts = append(simOpts, simframework.WithSchedulerConfigFile(opts.SchedulerConfigFile))
	}
	if dra != nil {
		simOpts = append(simOpts, simframework.WithDRA(dra))
	}
	if dra != nil && reporting != nil {
		slices := factory.Resource().V1().ResourceSlices().Lister()
		reporting.UseResourceSlices(func() ([]*resourceapi.ResourceSlice, error) { return slices.List(labels.Everything()) })
	}
	snapshot := simframework.NewSnapshot(nil, nil)
	snapshot.SetStepObserver(snapshotStepTimer(m))
	sim, err := simframework.New(ctx, snapshot, factory, simOpts...)
	if err != nil {
		return nil, nil, err
	}
	nsFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(opts.Namespace),
		informers.WithTransform(informercache.NewTrimmer().Transform))
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
		scaleup.WithDeletionCounter(m.RegisterDeletedNodes), scaleup.WithReporter(reporting),
		scaleup.WithInstancePods(scaleup.InstancePodsFromListers{Provider: provider, Nodes: factory.Core().V1().Nodes().Lister(),
			Pods: factory.Core().V1().Pods().Lister(), Live: livePods{client}})}
	if quotas != nil {
		suOpts = append(suOpts, scaleup.WithCapacityQuotas(quotas))
	}
	return scaleup.New(provider, sim, estimator.New(sim), chain, ScaleUpOptions(opts), state, suOpts...), nsFactory, nil
}

// NewDRASource reads the cluster's DRA objects (for the simulator and the
// device readiness of nodes) when the API server serves resource.k8s.io/v1;
// without it, one log line, a nil source, and pods with resource claims
// simply fit no node in simulation.
func NewDRASource(ctx context.Context, client kubernetes.Interface, factory informers.SharedInformerFactory) (simframework.DRASource, error) {
	served, err := simframework.DRAServed(client.Discovery())
	if err != nil {
		return nil, err
	}
	if !served {
		klog.FromContext(ctx).Info("Dynamic Resource Allocation is not simulated: the API server does not serve it",
			"groupVersion", simframework.DRAGroupVersion)
		return nil, nil
	}
	return simframework.NewInformerDRASource(factory), nil
}

// capacityQuotaStatusPeriod is how often CapacityQuotas' status.used is
// brought up to date.
const capacityQuotaStatusPeriod = 10 * time.Second

// StartCapacityQuotas checks that CapacityQuotas are served (a clear
// start-up error otherwise), starts their informer on informerCtx and waits
// for its first list, so that no scale-up runs before the quotas are known.
func StartCapacityQuotas(ctx, informerCtx context.Context, restConfig *rest.Config, recorder record.EventRecorder) (*capacityquota.Source, error) {
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

// WriteQuotaStatus writes the CapacityQuotas' status.used, every period
// once the node informer has listed, until informerCtx ends.
func WriteQuotaStatus(informerCtx context.Context, src *capacityquota.Source, inf *Informers) {
	nodeInformer := inf.Factory.Core().V1().Nodes().Informer()
	go func() {
		if !cache.WaitForCacheSync(informerCtx.Done(), nodeInformer.HasSynced) {
			return
		}
		wait.UntilWithContext(informerCtx, func(ctx context.Context) {
			if nodes, err := inf.Listers.Nodes.List(labels.Everything()); err == nil {
				src.WriteStatus(ctx, nodes)
			}
		}, capacityQuotaStatusPeriod)
	}()
}

// snapshotStepTimer adds the snapshot's Fork, Commit and Revert times to
// function_aggregated_duration_seconds under upstream's DRA snapshot labels.
func snapshotStepTimer(m *metrics.Metrics) simframework.StepObserver {
	labels := map[simframework.SnapshotStep]string{simframework.StepFork: metrics.AggregatedDRASnapshotFork,
		simframework.StepCommit: metrics.AggregatedDRASnapshotCommit, simframework.StepRevert: metrics.AggregatedDRASnapshotRevert}
	return func(step simframework.SnapshotStep, d time.Duration) { m.AddAggregatedDuration(labels[step], d) }
}

// livePods reads a node's pods from the API server (a quorum read), for a
// rollback's last look before it deletes an instance: a pod bound since the
// informer's last update is seen.
type livePods struct{ client kubernetes.Interface }

func (l livePods) PodsOnNode(ctx context.Context, node string) ([]*apiv1.Pod, error) {
	list, err := l.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, err
	}
	out := make([]*apiv1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
