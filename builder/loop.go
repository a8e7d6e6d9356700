package builder

import (
	"context"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cleanup"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/consolidation"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/interruption"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors/capacitybuffers"
	"k8s.io/autoscaler/cluster-autoscaler/processors/provreqs"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	simframework "k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// Inputs are what NewLoop wires the loop from; each is built before (by
// Run, the explain command or a benchmark).
type Inputs struct {
	Opts config.Options
	// RESTConfig is nil offline (explain --snapshot, benchmarks): what
	// needs a client of its own (ProvisioningRequests, CapacityQuotas,
	// CapacityBuffers) must then be off.
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	Metrics    *metrics.Metrics
	Informers  *Informers
	Provider   cloudprovider.CloudProvider
	Recorder   record.EventRecorder
	// Explainer, when set, keeps each loop's reasons for /explainz.
	Explainer *explain.Recorder
	// ReadOnly (`explain`) attempts no write: no DeletionCandidate taint
	// is written or removed and no removal starts; no CapacityQuota status
	// is written. (Events are the recorder's: see NewEventRecorder.)
	ReadOnly bool
	// ProvReqs wrap what the ProvisioningRequest processor writes through.
	ProvReqs ProvReqWrappers
	// LeaseLost, when set, reports whether the lead ended while the process
	// goes on: the status ConfigMap is then left to the new leader.
	LeaseLost func() bool
	// Clock is what every timer of the loop reads (the loop's own, the
	// scale-up trigger's, the soft-taint budget's and the removals'); nil
	// is the real clock. Tests drive the loop with a fake one.
	Clock clock.WithTicker
	// Disruption is what the disruption engine gets besides the flags
	// (its sources, budget and protections).
	Disruption DisruptionInputs
}

// Loop is what NewLoop built: the loop's options and the parts its caller
// starts, watches or reads.
type Loop struct {
	// Options make core.NewAutoscaler the loop the binary runs.
	Options []core.AutoscalerOption
	// NamespaceFactory feeds the priority expander's ConfigMap lister; it
	// is started with the cluster-wide factory.
	NamespaceFactory informers.SharedInformerFactory
	// DRA reads the cluster's DRA objects; nil when resource.k8s.io/v1 is
	// not served.
	DRA       simframework.DRASource
	State     *clusterstate.Registry
	ScaleUp   *scaleup.Orchestrator
	ScaleDown *scaledown.ScaleDown
	Taints    *scaledown.Taints
	// ProvReqInformer and Requests are nil unless
	// --enable-provisioning-requests.
	ProvReqInformer cache.SharedIndexInformer
	Requests        *provreqs.Requests
	// Buffers is nil unless a CapacityBuffer flag is on.
	Buffers *Buffers
	// Stop ends the loop's context: removals in flight stop.
	Stop context.CancelFunc
	// Clock is Inputs.Clock, the real clock when that was nil.
	Clock clock.WithTicker
	// Disruption is the disruption engine (node healing and every other
	// reason); nil unless healing is on or a source was given. Sources that
	// run elsewhere in the loop Offer their candidates to it.
	Disruption *disruption.Engine
	// Interruption reads the provider's interruption notices (nil when it
	// offers none); StartInterruption runs it.
	Interruption *interruption.Source
}

// NewLoop wires the loop's subsystems, each step from the ones before:
// cluster state and reporting, capacity quotas and scale-up, cleanup, the
// status ConfigMap, scale-down, ProvisioningRequests, CapacityBuffers and the
// processors. It returns the loop's context: scale-down's removals run on
// it, so that whatever ends the loop stops them, and they are waited for
// (pushed on stack) before the status ConfigMap is dealt with. informerCtx
// is what the informers NewLoop starts run on.
func NewLoop(ctx, informerCtx context.Context, in Inputs, stack *Stack) (*Loop, context.Context, error) {
	opts := in.Opts
	l := &Loop{Clock: in.Clock}
	if l.Clock == nil {
		l.Clock = clock.RealClock{}
	}
	dra, err := NewDRASource(ctx, in.Client, in.Informers.Factory)
	if err != nil {
		return nil, nil, err
	}
	l.DRA = dra
	l.State = NewClusterState(opts, dra)
	statusRef := StatusRef(opts)
	reporting := core.NewReporting(in.Metrics, in.Provider, in.Recorder, clusterEventsRef(opts))
	l.ScaleUp, l.NamespaceFactory, err = newScaleUpWithQuotas(ctx, informerCtx, in, l.State, reporting, dra)
	if err != nil {
		return nil, nil, err
	}
	if in.Explainer != nil {
		scaleup.WithExplainer(in.Explainer)(l.ScaleUp)
		l.Options = append(l.Options, core.WithExplainer(in.Explainer))
	}
	l.Options = append(l.Options, core.WithScaleUp(l.ScaleUp), core.WithEventRecorder(in.Recorder),
		core.WithClusterState(l.State),
		core.WithCleanup(NewCleanup(opts, in.Provider, in.Metrics, in.Recorder, statusRef)))
	var status *clusterstate.StatusWriter
	if opts.WriteStatusConfigMap {
		status = NewStatusWriter(ctx, opts, in.Client, stack, in.LeaseLost)
		l.Options = append(l.Options, core.WithStatusWriter(status))
	}
	l.ScaleDown, l.Taints = NewScaleDown(opts, in.Client, in.Informers.Factory, in.Provider, in.Recorder, in.Metrics,
		reporting, in.ReadOnly, l.Clock)
	if in.Explainer != nil {
		scaledown.WithExplainer(in.Explainer)(l.ScaleDown)
	}
	l.Options = append(l.Options, core.WithScaleDown(l.ScaleDown))
	loopCtx, stopLoop := context.WithCancel(ctx)
	l.Stop = stopLoop
	stack.Defer(func() { stopLoop(); l.ScaleDown.Wait() })
	// The nodes of Capacity Blocks about to end are drained (and the
	// ProvisioningRequests on them revoked).
	blockEnd := reservationEndSource(opts, in)
	if blockEnd != nil {
		in.Disruption.Sources = append(slices.Clip(in.Disruption.Sources), blockEnd)
	}
	if opts.EnableProvisioningRequests {
		var p *processor.Processor
		if l.ProvReqInformer, l.Requests, p, err = newRequests(ctx, in, l.ScaleUp, l.State); err != nil {
			return nil, nil, err
		}
		if blockEnd != nil {
			endingCapacity(blockEnd)(p)
		}
		// The nodes of requests past their maxRunDurationSeconds go
		// through the disruption engine.
		in.Disruption.Sources = append(slices.Clip(in.Disruption.Sources), runLimitSource(p))
	}
	if l.Buffers, err = NewBuffers(ctx, opts, in.RESTConfig, in.Informers.Factory, in.Recorder, in.Metrics); err != nil {
		return nil, nil, err
	}
	var injector *capacitybuffers.Injector
	if l.Buffers != nil {
		injector = l.Buffers.Injector
	}
	procs := NewProcessors(opts, in.Informers.Factory, in.Recorder, l.Requests, injector)
	in, l.Interruption = withInterruption(in)
	if l.Disruption, err = addDisruption(ctx, opts, in, &procs, status, l.State); err != nil {
		return nil, nil, err
	}
	if l.Disruption != nil {
		// Scale-down's removals are the engine's delete-only case.
		scaledown.WithLedger(scaleDownLedger{l.Disruption})(l.ScaleDown)
	}
	if l.Disruption != nil && opts.Disruption.ConsolidationEnabled {
		copts, err := ConsolidationOptions(opts)
		if err != nil {
			return nil, nil, err
		}
		l.Options = append(l.Options, core.WithConsolidation(&core.Consolidation{
			Planner: consolidation.NewPlanner(copts, consolidation.WithClock(l.Clock)),
			Rules:   NewDrainRules(opts, in.Informers.Factory), Offer: l.Disruption.Offer, InFlight: l.Disruption.InFlight,
			Replacing: l.Disruption.Replacing, Protected: protections(in.Disruption.Protected, bookingHolders(procs)...),
			Explain: explainConsolidation(in.Explainer), Marks: consolidationMarks(in),
			BudgetLeft: func(ctx context.Context, nodes []*apiv1.Node, now time.Time) map[string]int {
				return l.Disruption.BudgetLeft(ctx, disruption.Consolidatable, nodes, now)
			}}))
	} else if marks := consolidationMarks(in); marks != nil {
		// Consolidation off: the step only removes the marks a run with it
		// on left behind.
		l.Options = append(l.Options, core.WithConsolidation(&core.Consolidation{Marks: marks}))
	}
	l.Options = append(l.Options, core.WithProcessors(procs))
	return l, loopCtx, nil
}

// newScaleUpWithQuotas starts the capacity quotas (when enabled; their
// status is written unless read-only) and wires the orchestrator.
func newScaleUpWithQuotas(ctx, informerCtx context.Context, in Inputs, state *clusterstate.Registry,
	reporting *core.Reporting, dra simframework.DRASource) (*scaleup.Orchestrator, informers.SharedInformerFactory, error) {
	var quotas scaleup.QuotaSource
	if in.Opts.CapacityQuotasEnabled {
		src, err := StartCapacityQuotas(ctx, informerCtx, in.RESTConfig, in.Recorder)
		if err != nil {
			return nil, nil, err
		}
		quotas = src
		if !in.ReadOnly {
			WriteQuotaStatus(informerCtx, src, in.Informers)
		}
	}
	return NewScaleUp(ctx, ScaleUpInputs{Opts: in.Opts, Client: in.Client, Informers: in.Informers,
		Provider: in.Provider, Recorder: in.Recorder, State: state, Metrics: in.Metrics, Reporting: reporting,
		Quotas: quotas, DRA: dra})
}

// newRequests wires the ProvisioningRequest processor and the loop's view
// of the requests; the informer is started by Watch or SyncRequests.
func newRequests(ctx context.Context, in Inputs, orchestrator *scaleup.Orchestrator,
	state *clusterstate.Registry) (cache.SharedIndexInformer, *provreqs.Requests, *processor.Processor, error) {
	p, informer, err := NewProvReqProcessor(ctx, in.Opts, in.RESTConfig, in.Client, in.Informers.Factory, in.Recorder,
		orchestrator, in.Metrics, in.ProvReqs)
	if err != nil {
		return nil, nil, nil, err
	}
	if in.Explainer != nil {
		processor.WithExplainer(in.Explainer)(p)
	}
	return informer, provreqs.New(p, state), p, nil
}

// NewClusterState is the cluster state registry; with DRA, a node counts
// as ready once it publishes its template's devices.
func NewClusterState(opts config.Options, dra simframework.DRASource) *clusterstate.Registry {
	var stateOpts []clusterstate.RegistryOption
	if dra != nil {
		stateOpts = append(stateOpts, clusterstate.WithResourceSlices(dra))
	}
	return clusterstate.NewRegistry(ClusterStateOptions(opts), stateOpts...)
}

// StatusRef is the status ConfigMap's reference, which cluster-level
// events name.
func StatusRef(opts config.Options) *apiv1.ObjectReference {
	return &apiv1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: opts.Namespace, Name: opts.StatusConfigMapName}
}

// clusterEventsRef is where cluster-level events go: the status ConfigMap
// when it is written, as upstream; nil otherwise.
func clusterEventsRef(opts config.Options) *apiv1.ObjectReference {
	if !opts.WriteStatusConfigMap {
		return nil
	}
	return StatusRef(opts)
}

// NewCleanup is the deletion of broken instances.
func NewCleanup(o config.Options, provider cloudprovider.CloudProvider, m *metrics.Metrics, recorder record.EventRecorder,
	statusRef *apiv1.ObjectReference) *cleanup.Cleaner {
	return cleanup.New(cleanup.Options{
		ForceDeleteUnregistered: o.ForceDeleteUnregisteredNodes,
		ForceDeleteFailed:       o.ForceDeleteFailedNodes,
		MaxDeletionsPerLoop:     o.MaxBrokenNodeDeletionsPerLoop,
		BreakerRatio:            o.UnregisteredBreakerRatio,
		BreakerMinimum:          o.UnregisteredBreakerMinimum,
		DryRun:                  o.DryRunDeletions,
	}, provider, m, cleanup.WithEvents(recorder, statusRef))
}

// NewStatusWriter writes the initial status ConfigMap and pushes on stack
// its removal at a clean exit: like upstream, a stale status would claim an
// autoscaler that no longer runs. A replica whose lease was lost (leaseLost,
// when set) leaves it alone: the new leader writes it.
func NewStatusWriter(ctx context.Context, opts config.Options, client kubernetes.Interface, stack *Stack,
	leaseLost func() bool) *clusterstate.StatusWriter {
	logger := klog.FromContext(ctx)
	status := &clusterstate.StatusWriter{Client: client, Namespace: opts.Namespace, Name: opts.StatusConfigMapName}
	if err := status.WriteInitializing(ctx, time.Now()); err != nil {
		logger.Error(err, "Writing the initial status ConfigMap")
	}
	stack.Defer(func() {
		if leaseLost != nil && leaseLost() {
			logger.Info("Lost the lease: leaving the status ConfigMap to the new leader")
			return
		}
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := status.Delete(delCtx); err != nil {
			logger.Error(err, "Deleting the status ConfigMap")
		}
	})
	return status
}

// consolidationMarksPerLoop caps the consolidation-candidate taints written
// (and removed) per loop: a plan of 200 nodes is marked in two loops.
const consolidationMarksPerLoop = 100

// consolidationMarks is the writer of the consolidation-candidate taints,
// nil in a read-only loop; with consolidation off or
// --max-bulk-soft-taint-count=0 (no PreferNoSchedule taints at all) it only
// removes those a run before left.
func consolidationMarks(in Inputs) *consolidation.Marks {
	if in.ReadOnly || in.Client == nil {
		return nil
	}
	removeOnly := !in.Opts.Disruption.ConsolidationEnabled || in.Opts.MaxBulkSoftTaintCount == 0
	return consolidation.NewMarks(in.Client, consolidationMarksPerLoop, removeOnly)
}
