package builder

import (
	"context"
	"slices"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/interruption"
)

// interruptionOffering is a provider that may offer interruption notices
// (the aws provider with --aws-interruption-queue): nil when it does not.
type interruptionOffering interface {
	InterruptionSource() cloudprovider.InterruptionSource
}

// withInterruption adds the interrupted reason's source to the engine's
// sources when the provider offers interruption notices, never in a
// read-only loop (explain): a source it returns (nil otherwise) is polled
// by StartInterruption once the loop's trigger exists.
func withInterruption(in Inputs) (Inputs, *interruption.Source) {
	if in.ReadOnly || in.Provider == nil {
		return in, nil
	}
	o, ok := in.Provider.(interruptionOffering)
	if !ok {
		return in, nil
	}
	src := o.InterruptionSource()
	if src == nil {
		return in, nil
	}
	s := interruption.New(src, in.Provider, in.Metrics.Registerer())
	in.Disruption.Sources = append(slices.Clip(in.Disruption.Sources), s)
	return in, s
}

// StartInterruption polls the provider's interruption notices until ctx
// ends, a new notice triggering a loop; nothing when the loop has no
// interruption source.
func StartInterruption(ctx context.Context, loop *Loop, runner core.LoopTrigger) {
	if loop.Interruption == nil {
		return
	}
	if loop.Disruption != nil {
		loop.Interruption.SetInFlight(loop.Disruption.InFlight)
	}
	klog.FromContext(ctx).Info("Reading interruption notices", "every", interruption.DefaultPollInterval)
	go loop.Interruption.Run(ctx, runner.Trigger)
}
