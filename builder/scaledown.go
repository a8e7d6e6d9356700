package builder

import (
	"context"
	"math"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
)

// NewScaleDown wires the planner (with the drain rules on informer
// listers) and the actuator; both time what they wait for on clk.
func NewScaleDown(opts config.Options, client kubernetes.Interface, factory informers.SharedInformerFactory,
	provider cloudprovider.CloudProvider, recorder record.EventRecorder, m *metrics.Metrics,
	reporting *core.Reporting, readOnly bool, clk clock.Clock) (*scaledown.ScaleDown, *scaledown.Taints) {
	rules := NewDrainRules(opts, factory)
	taintOpts := []scaledown.TaintsOption{scaledown.WithSoftTaintTime(opts.MaxBulkSoftTaintTime, clk)}
	var sdOpts []scaledown.Option
	if readOnly {
		taintOpts = append(taintOpts, scaledown.WithoutCandidateWrites())
		sdOpts = append(sdOpts, scaledown.WithoutRemovals())
	}
	taints := scaledown.NewTaints(client, opts.MaxBulkSoftTaintCount, opts.CordonNodeBeforeTerminating, taintOpts...)
	sd := ScaleDownOptions(opts)
	planner := scaledown.NewPlanner(sd, provider, rules, taints)
	var actOpts []scaledown.ActuatorOption
	if opts.DynamicNodeDeleteDelayAfterTaint {
		actOpts = append(actOpts, scaledown.WithDynamicDeleteDelay(factory.Core().V1().Nodes().Lister()))
	}
	actuator := scaledown.NewActuator(sd, client, taints, recorder, reporting, clk, actOpts...)
	return scaledown.New(sd, planner, actuator, m, sdOpts...), taints
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

// CleanStaleTaints removes, once at start-up, the deletion taints a
// previous run left on nodes of the managed groups (but on those the cloud
// provider is deleting), with a ClusterAutoscalerCleanup event on each node.
func CleanStaleTaints(ctx context.Context, nodes corelisters.NodeLister, provider cloudprovider.CloudProvider,
	taints *scaledown.Taints, recorder record.EventRecorder) {
	all, err := nodes.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing nodes to clean stale deletion taints")
		return
	}
	taints.CleanUp(ctx, scaledown.LeftToBeDeleted(ctx, provider, all), recorder)
}
