package processors

import (
	"context"
	"fmt"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
)

// Event reasons on pods, as upstream's.
const (
	EventTriggeredScaleUp  = "TriggeredScaleUp"
	EventNotTriggerScaleUp = "NotTriggerScaleUp"
)

// ScaleUpEvents is the scale-up status processor that tells the pods what
// the scale-up did for them: TriggeredScaleUp on pods a scale-up serves,
// and, when no group was scaled up in this loop, NotTriggerScaleUp with the
// reasons on the pods left. Stand-ins for replicas not created yet and the
// pods injected for CapacityBuffers get none (the buffers get theirs, from
// processors/capacitybuffers).
// Like upstream, every pod gets its event: there is no per-loop cap (the
// events client's rate limiter and client-go's spam filter pace them).
type ScaleUpEvents struct {
	Recorder record.EventRecorder
}

// ScaleUpDone implements ScaleUpStatusProcessor.
func (e ScaleUpEvents) ScaleUpDone(_ context.Context, _ *Loop, status ScaleUpStatus) {
	if e.Recorder == nil {
		return
	}
	res := status.Result
	for i, inc := range res.Increases {
		if i > 0 && res.Increases[i-1].Decision == inc.Decision {
			continue // the same pods, already told about every group
		}
		var parts []string
		for _, other := range res.Increases[i:] {
			if other.Decision == inc.Decision {
				parts = append(parts, fmt.Sprintf("{%s %d->%d (max: %d)}", other.NodeGroup, other.From, other.To, other.Max))
			}
		}
		msg := "pod triggered scale-up: [" + strings.Join(parts, " ") + "]"
		for _, p := range inc.Pods {
			if !exists(p) {
				continue
			}
			e.Recorder.Event(p, apiv1.EventTypeNormal, EventTriggeredScaleUp, msg)
		}
	}
	if len(res.Increases) > 0 {
		return
	}
	for p, reason := range res.Remaining {
		if !exists(p) {
			continue
		}
		e.Recorder.Event(p, apiv1.EventTypeNormal, EventNotTriggerScaleUp,
			"pod didn't trigger scale-up: "+strings.TrimSpace(reason))
	}
}

// exists reports whether p is a pod of the API, not a stand-in of the loop.
func exists(p *apiv1.Pod) bool {
	return !IsUpcomingReplica(p) && !capacitybuffer.IsFakePod(p)
}
