package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/explain/readonly"
	"k8s.io/autoscaler/cluster-autoscaler/explain/whatif"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
)

// explainUsage is the subcommand's synopsis.
const explainUsage = "usage: cluster-autoscaler explain [--snapshot DUMP.json] (pod NAMESPACE/NAME | node NAME | provisioningrequest NAMESPACE/NAME | -f MANIFESTS.yaml) [-o text|json] [the autoscaler's flags]"

// errNotExplained: the object has no verdict in the simulated loop.
var errNotExplained = errors.New("not explained")

// explainQuery is what `explain` was asked about.
type explainQuery struct {
	kind, name, output string
	// snapshot is the /snapshotz dump to answer from, "" for the live
	// cluster.
	snapshot string
}

// runExplainCommand runs `cluster-autoscaler explain KIND NAME [flags]`:
// one loop, simulated with the autoscaler's flags on the live cluster
// through clients that cannot write, and the verdict on the object asked
// about. Exit codes: 0 explained, 1 failed or not explained, 2 bad usage.
func runExplainCommand(args []string, stdout, stderr io.Writer) int {
	snapshot, args, err := snapshotArg(args)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: %v\n%s\n", err, explainUsage)
		return 2
	}
	if len(args) < 2 || (strings.HasPrefix(args[0], "-") && args[0] != "-f" && args[0] != "--filename") ||
		strings.HasPrefix(args[1], "-") {
		_, _ = fmt.Fprintln(stderr, explainUsage)
		return 2
	}
	q := explainQuery{kind: args[0], name: args[1], output: "text", snapshot: snapshot}
	if q.kind == "--filename" {
		q.kind = "-f"
	}
	switch q.kind {
	case "pod", "node", "provisioningrequest", "-f":
	default:
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: unknown kind %q\n%s\n", q.kind, explainUsage)
		return 2
	}
	cl := newCommandLine()
	cl.fs.SetOutput(stderr)
	cl.fs.StringVarP(&q.output, "output", "o", q.output, "Output format of explain: text or json.")
	if err := cl.parse(args[2:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: invalid flags:\n%v\n", err)
		return 2
	}
	if q.output != "text" && q.output != "json" {
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: -o %q: want text or json\n", q.output)
		return 2
	}
	if err := cl.applyLogging(); err != nil {
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: invalid flags:\n%v\n", err)
		return 2
	}
	defer klog.Flush()
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), klog.Background()), 5*time.Minute)
	defer cancel()
	err = explainOnce(ctx, explainOptions(cl.opts), q, stdout, stderr)
	switch {
	case errors.Is(err, errNotExplained):
		_, _ = fmt.Fprintln(stderr, strings.TrimSuffix(err.Error(), ": "+errNotExplained.Error()))
		return 1
	case err != nil:
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: %v\n", err)
		return 1
	}
	return 0
}

// explainOptions are the autoscaler's options for one simulated loop: no
// leader election, no status ConfigMap, no buffer controller, no healing,
// broken instances only told (each would write). The wiring's readOnly
// keeps the rest from attempting writes: no event sent, no removal
// started, no taint written.
func explainOptions(o config.Options) config.Options {
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
	restConfig, err := buildRESTConfig(opts)
	if err != nil {
		return explainSource{}, err
	}
	restConfig = readonly.Config(restConfig)
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return explainSource{}, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return explainSource{opts: opts, restConfig: restConfig, client: client, providers: newProviderRegistry(),
		now: time.Now()}, nil
}

// explainOnce wires the autoscaler as the process would, on read-only
// clients and a read-only cloud provider (or on a dump), runs one loop and
// writes the verdict on q's object to out; notes go to errOut.
func explainOnce(ctx context.Context, opts config.Options, q explainQuery, out, errOut io.Writer) error {
	var src explainSource
	var err error
	if q.snapshot != "" {
		src, err = offlineSource(opts, q.snapshot, errOut)
	} else {
		src, err = liveSource(opts)
	}
	if err != nil {
		return err
	}
	var objects []whatif.Object
	if q.kind == "-f" {
		if objects, err = readManifests(q.name, src.now); err != nil {
			return err
		}
	}
	rec := explain.NewRecorder()
	var provider *readonly.Provider
	statuses := newStatusRecorder()
	w := &wiring{opts: src.opts, restConfig: src.restConfig, client: src.client, m: metrics.New(prometheus.NewRegistry()),
		logger: klog.FromContext(ctx), explain: rec, readOnly: true,
		wrapProvider: func(p cloudprovider.CloudProvider) cloudprovider.CloudProvider {
			provider = readonly.NewProvider(p)
			return provider
		},
		wrapProvReqs: provReqWrappers{
			status:  func(processor.StatusWriter) processor.StatusWriter { return statuses },
			records: func(r processor.RecordStore) processor.RecordStore { return unsavedRecords{r} },
		}}
	defer w.unwind()
	if err := w.build(ctx, ctx, src.providers); err != nil {
		return err
	}
	if err := w.syncRequests(ctx); err != nil {
		return err
	}
	if synced, err := w.syncInformers(ctx); !synced {
		if err == nil {
			err = ctx.Err()
		}
		return err
	}
	if err := addWhatIfRequests(w, objects); err != nil {
		return err
	}
	listers := w.listers
	var extra []*apiv1.Pod
	for _, o := range objects {
		extra = append(extra, o.Pods...)
	}
	listers.Pods = whatif.Lister(listers.Pods, extra)
	autoscaler := core.NewAutoscaler(w.opts, listers, w.provider, w.m, w.loopOpts...)
	if _, err := autoscaler.RunOnce(w.loopCtx, src.now); err != nil {
		return fmt.Errorf("simulating a loop: %w", err)
	}
	if q.kind == "-f" {
		increases := provider.Increases()
		return writeWhatIf(whatIfResult{rec: rec, objects: objects, increases: increases, statuses: statuses,
			cost: priceIncreases(ctx, src.opts.Expanders, w.provider, increases, src.now)}, q.output == "json", out)
	}
	return writeExplanation(rec, q, out)
}

// writeExplanation writes the recorder's verdict on q's object.
func writeExplanation(rec *explain.Recorder, q explainQuery, out io.Writer) error {
	asJSON := q.output == "json"
	switch q.kind {
	case "pod":
		g, at, ok := rec.Pod(q.name)
		if !ok {
			return fmt.Errorf("pod %s was not among the pending pods the simulated loop considered for scale-up "+
				"(it may be scheduled, not yet marked unschedulable, too new, or not exist): %w", q.name, errNotExplained)
		}
		if asJSON {
			return encodeJSON(out, struct {
				At time.Time `json:"at"`
				explain.PodGroup
			}{at, g})
		}
		return explain.WritePodGroup(out, g, at)
	case "node":
		v, note, at, ok := rec.Node(q.name)
		if !ok {
			return fmt.Errorf("node %s has no scale-down verdict in the simulated loop: %w", q.name, errNotExplained)
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
		gs, at := rec.Request(q.name)
		conds := rec.RequestConditions(q.name)
		if len(gs) == 0 && len(conds) == 0 {
			return fmt.Errorf("ProvisioningRequest %s had no pods in the simulated loop's scale-up: %w", q.name, errNotExplained)
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
