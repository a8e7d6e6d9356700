// Package command runs the `cluster-autoscaler explain` subcommand once its
// arguments are parsed (package main parses them): it wires one loop with
// the builder on clients and a cloud provider that cannot write (the live
// cluster read-only, or a /snapshotz dump offline), runs it, and renders the
// explainer's verdict on the object asked about, or for manifests (-f) what
// would grow and at what cost.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/explain/readonly"
	"k8s.io/autoscaler/cluster-autoscaler/explain/whatif"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
)

// ErrNotExplained: the object has no verdict in the simulated loop.
var ErrNotExplained = errors.New("not explained")

// Query is what `explain` was asked about.
type Query struct {
	// Kind is pod, node, provisioningrequest or -f (Name is then the
	// manifests' file, "-" for stdin).
	Kind, Name string
	// Output is text or json.
	Output string
	// Snapshot is the /snapshotz dump to answer from, "" for the live
	// cluster.
	Snapshot string
}

// Options are the autoscaler's options for one simulated loop: no
// leader election, no status ConfigMap, no buffer controller, no healing,
// broken instances only told (each would write). The wiring's readOnly
// keeps the rest from attempting writes: no event sent, no removal
// started, no taint written.
func Options(o config.Options) config.Options {
	o.LeaderElection.Enabled = false
	o.WriteStatusConfigMap = false
	o.CapacityBufferControllerEnabled = false
	o.CapacityBufferPodInjectionEnabled = false
	o.NodeHealingEnabled = false
	o.ExplainEnabled = true
	o.DebuggingSnapshotEnabled = false
	// Broken instances are told, not deleted.
	o.DryRunDeletions = true
	return o
}

// explainSource is what one simulated loop reads: the live cluster
// through clients that cannot write, or a /snapshotz dump.
type explainSource struct {
	opts       config.Options
	restConfig *rest.Config // nil offline
	client     kubernetes.Interface
	providers  *cloudprovider.Registry
	// now is the simulated loop's time: the dump's, or the clock's.
	now time.Time
}

// liveSource reads the cluster of opts' kubeconfig, read-only.
func liveSource(opts config.Options) (explainSource, error) {
	restConfig, err := builder.RESTConfig(opts)
	if err != nil {
		return explainSource{}, err
	}
	restConfig = readonly.Config(restConfig)
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return explainSource{}, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return explainSource{opts: opts, restConfig: restConfig, client: client, providers: builder.NewProviderRegistry(),
		now: time.Now()}, nil
}

// Run wires the autoscaler as the process would, with Options(opts), on
// read-only clients and a read-only cloud provider (or on a dump), runs one
// loop and writes the verdict on q's object to out; notes go to errOut.
func Run(ctx context.Context, opts config.Options, q Query, out, errOut io.Writer) error {
	opts = Options(opts)
	var src explainSource
	var err error
	if q.Snapshot != "" {
		src, err = offlineSource(opts, q.Snapshot, errOut)
	} else {
		src, err = liveSource(opts)
	}
	if err != nil {
		return err
	}
	var objects []whatif.Object
	if q.Kind == "-f" {
		if objects, err = readManifests(q.Name, src.now); err != nil {
			return err
		}
	}
	rec := explain.NewRecorder()
	statuses := newStatusRecorder()
	stack := &builder.Stack{}
	defer stack.Unwind()
	informerCtx, stopInformers := context.WithCancel(ctx)
	stack.Defer(stopInformers)
	inf := builder.NewInformers(informerCtx, src.client)
	built, err := builder.NewProvider(ctx, src.providers, src.opts, src.client, inf, true)
	if err != nil {
		return err
	}
	provider := readonly.NewProvider(built)
	// readonly: nothing to save; the wrapped provider's Cleanup.
	stack.Defer(func() { builder.CleanUpProvider(ctx, provider) })
	// Events are logged at --v=4, not sent.
	recorder, shutdownEvents, err := builder.NewEventRecorder(ctx, src.opts, src.restConfig, src.client, true)
	if err != nil {
		return err
	}
	stack.Defer(shutdownEvents)
	m := metrics.New(prometheus.NewRegistry())
	loop, loopCtx, err := builder.NewLoop(ctx, informerCtx, builder.Inputs{Opts: src.opts, RESTConfig: src.restConfig,
		Client: src.client, Metrics: m, Informers: inf, Provider: provider, Recorder: recorder, Explainer: rec,
		ReadOnly: true, ProvReqs: builder.ProvReqWrappers{
			Status:  func(processor.StatusWriter) processor.StatusWriter { return statuses },
			Records: func(r processor.RecordStore) processor.RecordStore { return unsavedRecords{r} },
		}}, stack)
	if err != nil {
		return err
	}
	if err := builder.SyncRequests(ctx, informerCtx, loop.ProvReqInformer); err != nil {
		return err
	}
	if synced, err := builder.SyncInformers(ctx, informerCtx, stack, stopInformers, inf.Factory, loop.NamespaceFactory); !synced {
		if err == nil {
			err = ctx.Err()
		}
		return err
	}
	if err := addWhatIfRequests(inf, loop, objects); err != nil {
		return err
	}
	listers := inf.Listers
	var extra []*apiv1.Pod
	for _, o := range objects {
		extra = append(extra, o.Pods...)
	}
	listers.Pods = whatif.Lister(listers.Pods, extra)
	autoscaler := core.NewAutoscaler(builder.CoreOptions(src.opts), listers, provider, m, loop.Options...)
	if _, err := autoscaler.RunOnce(loopCtx, src.now); err != nil {
		return fmt.Errorf("simulating a loop: %w", err)
	}
	if q.Kind == "-f" {
		increases := provider.Increases()
		return writeWhatIf(whatIfResult{rec: rec, objects: objects, increases: increases, statuses: statuses,
			cost: priceIncreases(ctx, src.opts.Expanders, provider, increases, src.now)}, q.Output == "json", out)
	}
	return writeExplanation(rec, q, out)
}

// writeExplanation writes the recorder's verdict on q's object.
func writeExplanation(rec *explain.Recorder, q Query, out io.Writer) error {
	asJSON := q.Output == "json"
	switch q.Kind {
	case "pod":
		g, at, ok := rec.Pod(q.Name)
		if !ok {
			return fmt.Errorf("pod %s was not among the pending pods the simulated loop considered for scale-up "+
				"(it may be scheduled, not yet marked unschedulable, too new, or not exist): %w", q.Name, ErrNotExplained)
		}
		if asJSON {
			return encodeJSON(out, struct {
				At time.Time `json:"at"`
				explain.PodGroup
			}{at, g})
		}
		return explain.WritePodGroup(out, g, at)
	case "node":
		v, note, at, ok := rec.Node(q.Name)
		if !ok {
			return fmt.Errorf("node %s has no scale-down verdict in the simulated loop: %w", q.Name, ErrNotExplained)
		}
		if asJSON {
			return encodeJSON(out, struct {
				At        time.Time `json:"at"`
				ScaleDown string    `json:"scaleDown,omitempty"`
				explain.NodeVerdict
			}{at, note, v})
		}
		return explain.WriteNode(out, v, note, at)
	default:
		gs, at := rec.Request(q.Name)
		conds := rec.RequestConditions(q.Name)
		if len(gs) == 0 && len(conds) == 0 {
			return fmt.Errorf("ProvisioningRequest %s had no pods in the simulated loop's scale-up: %w", q.Name, ErrNotExplained)
		}
		if asJSON {
			return encodeJSON(out, struct {
				At         time.Time           `json:"at"`
				Conditions []explain.Condition `json:"conditions,omitempty"`
				PodGroups  []explain.PodGroup  `json:"podGroups"`
			}{at, conds, gs})
		}
		return explain.WriteRequest(out, conds, gs, at)
	}
}

func encodeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
