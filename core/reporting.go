package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// Reporting turns what scale-up and scale-down do into metrics, with the
// GPU labels the cloud provider tells for the nodes, and into the
// cluster-level events upstream records on the status ConfigMap. It
// implements scaleup.Reporter and scaledown.Metrics.
type Reporting struct {
	metrics  *metrics.Metrics
	provider cloudprovider.CloudProvider
	recorder record.EventRecorder
	status   *apiv1.ObjectReference
	// slices lists the cluster's ResourceSlices, for the dra_drivers label
	// of removed nodes (nil: resource.k8s.io is not served).
	slices func() ([]*resourceapi.ResourceSlice, error)

	mu sync.Mutex
	// degraded: the last scale-up skipped pods (graceful degradation).
	degraded bool
}

var (
	_ scaleup.Reporter  = (*Reporting)(nil)
	_ scaledown.Metrics = (*Reporting)(nil)
)

// NewReporting builds a Reporting. recorder and status may be nil: no
// cluster-level events are recorded then (--write-status-configmap=false,
// as upstream).
func NewReporting(m *metrics.Metrics, provider cloudprovider.CloudProvider, recorder record.EventRecorder,
	status *apiv1.ObjectReference) *Reporting {
	return &Reporting{metrics: m, provider: provider, recorder: recorder, status: status}
}

// UseResourceSlices makes the scale-down metrics label removed nodes with
// the DRA drivers of the slices list returns (an informer's lister). It is
// called while wiring, before the loop runs.
func (r *Reporting) UseResourceSlices(list func() ([]*resourceapi.ResourceSlice, error)) {
	r.slices = list
}

// nodeSlices returns the node-local slices of node name (none when they
// cannot be listed).
func (r *Reporting) nodeSlices(name string) []*resourceapi.ResourceSlice {
	if r.slices == nil {
		return nil
	}
	all, err := r.slices()
	if err != nil {
		return nil
	}
	var out []*resourceapi.ResourceSlice
	for _, sl := range all {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName == name {
			out = append(out, sl)
		}
	}
	return out
}

func (r *Reporting) event(eventType, reason, format string, args ...any) {
	if r.recorder == nil || r.status == nil {
		return
	}
	r.recorder.Eventf(r.status, eventType, reason, format, args...)
}

func (r *Reporting) gpu(ctx context.Context, node *apiv1.Node) metrics.GPU {
	if node == nil {
		return metrics.GPU{}
	}
	return metrics.GPUOf(r.provider.GetNodeGpuConfig(ctx, node), node, r.provider.GetAvailableGPUTypes(ctx))
}

// ScaleUpStarting implements scaleup.Reporter.
func (r *Reporting) ScaleUpStarting(_ context.Context, group cloudprovider.NodeGroup, from, to int) {
	r.event(apiv1.EventTypeNormal, "ScaledUpGroup", "Scale-up: setting group %s size to %d instead of %d (max: %d)",
		group.Id(), to, from, group.MaxSize())
}

// templateGPU is the GPU labels of a group's template, its DRA drivers those
// of the slices its nodes publish.
func (r *Reporting) templateGPU(ctx context.Context, template *cloudprovider.NodeInfo) metrics.GPU {
	if template == nil {
		return metrics.GPU{}
	}
	return r.gpu(ctx, template.Node).WithDevices(template.ResourceSlices)
}

// ScaledUp implements scaleup.Reporter.
func (r *Reporting) ScaledUp(ctx context.Context, group cloudprovider.NodeGroup, template *cloudprovider.NodeInfo, from, to int) {
	r.metrics.RegisterScaleUp(to-from, r.templateGPU(ctx, template))
	r.event(apiv1.EventTypeNormal, "ScaledUpGroup", "Scale-up: group %s size set to %d instead of %d (max: %d)",
		group.Id(), to, from, group.MaxSize())
}

// ScaleUpFailed implements scaleup.Reporter: a transient error that
// outlasted the retries is an API call error (the group is not backed off),
// anything else the cloud provider's.
func (r *Reporting) ScaleUpFailed(ctx context.Context, group cloudprovider.NodeGroup, template *cloudprovider.NodeInfo,
	nodes int, transient bool, err error) {
	reason := metrics.CloudProviderError
	if transient {
		reason = metrics.APICallError
	}
	r.metrics.RegisterFailedScaleUp(reason, nodes, r.templateGPU(ctx, template))
	r.event(apiv1.EventTypeWarning, "FailedToScaleUpGroup", "Scale-up failed for group %s: %v", group.Id(), err)
}

// SkippedScaleUp implements scaleup.Reporter.
func (r *Reporting) SkippedScaleUp(reason string) {
	r.metrics.RegisterSkippedScaleEvent(metrics.DirectionScaleUp, reason)
}

// SkippedPods implements scaleup.Reporter: skipped_pods_count, and the
// GracefulDegradationStarted (Warning) and GracefulDegradationStopped
// (Normal) events when pods begin or cease to be skipped.
func (r *Reporting) SkippedPods(_ context.Context, n int) {
	r.metrics.UpdateSkippedPods(metrics.SkippedPodsFilterOutSchedulable, n)
	r.mu.Lock()
	was := r.degraded
	r.degraded = n > 0
	r.mu.Unlock()
	switch {
	case n > 0 && !was:
		r.event(apiv1.EventTypeWarning, "GracefulDegradationStarted",
			"Graceful degradation started: %d pending pods skipped, their check against existing and upcoming nodes ran out of --pending-pods-batching-timeout", n)
	case n == 0 && was:
		r.event(apiv1.EventTypeNormal, "GracefulDegradationStopped", "Graceful degradation stopped: no pending pod skipped")
	}
}

// MaxNodesTotalReached implements scaleup.Reporter.
func (r *Reporting) MaxNodesTotalReached(_ context.Context, maxNodes int) {
	r.event(apiv1.EventTypeWarning, "MaxNodesTotalReached", "Max total nodes in cluster reached: %v", maxNodes)
}

// Binpacking implements scaleup.Reporter.
func (r *Reporting) Binpacking(template *apiv1.Node, namespaces, groups int) {
	r.metrics.ObserveBinpackingHeterogeneity(template, namespaces, groups)
}

// UpdateDuration implements scaleup.Reporter and scaledown.Metrics.
func (r *Reporting) UpdateDuration(function string, d time.Duration) {
	observeDuration(r.metrics, function, d)
}

func observeDuration(m *metrics.Metrics, function string, d time.Duration) {
	m.UpdateDuration(function, d)
}

// OverflowingControllers implements scaleup.Reporter.
func (r *Reporting) OverflowingControllers(n int) { r.metrics.UpdateOverflowingControllers(n) }

// RemovingNode implements scaledown.Metrics.
func (r *Reporting) RemovingNode(_ context.Context, node *apiv1.Node, empty bool, utilization float64, pods []string) {
	if empty {
		r.event(apiv1.EventTypeNormal, "ScaleDownEmpty", "Scale-down: removing empty node %q", node.Name)
		return
	}
	r.event(apiv1.EventTypeNormal, "ScaleDown", "Scale-down: removing node %s, utilization: %v, pods to reschedule: %s",
		node.Name, utilization, strings.Join(pods, ","))
}

// ScaledDown implements scaledown.Metrics.
func (r *Reporting) ScaledDown(ctx context.Context, node *apiv1.Node, reason string) {
	r.metrics.RegisterScaleDown(reason, 1, r.gpu(ctx, node).WithDevices(r.nodeSlices(node.Name)))
	if reason == scaledown.ReasonEmpty {
		r.event(apiv1.EventTypeNormal, "ScaleDownEmpty", "Scale-down: empty node %s removed", node.Name)
		return
	}
	r.event(apiv1.EventTypeNormal, "ScaleDown", "Scale-down: node %s removed with drain", node.Name)
}

// RegisterEvictions implements scaledown.Metrics.
func (r *Reporting) RegisterEvictions(succeeded, failed int) {
	r.metrics.RegisterEvictions(succeeded, failed)
}

// ObserveNodeRemoval implements scaledown.Metrics.
func (r *Reporting) ObserveNodeRemoval(deleted bool, sinceUnneeded time.Duration) {
	r.metrics.ObserveNodeRemoval(deleted, sinceUnneeded)
}

// isTransientIncrease reports whether a scale-up error is a transient one
// that outlasted the retries.
func isTransientIncrease(err error) bool {
	var ie *scaleup.IncreaseError
	return errors.As(err, &ie) && ie.Transient
}
