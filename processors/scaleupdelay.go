package processors

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ScaleUpDelay is the pod-list processor that holds back pods younger than
// their scale-up delay (--new-pod-scale-up-delay, or the pod's longer
// annotation): they reach a later loop's scale-up, not this one's.
type ScaleUpDelay struct {
	Delay time.Duration
}

// ProcessPods implements PodListProcessor.
func (d ScaleUpDelay) ProcessPods(ctx context.Context, loop *Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	logger := klog.FromContext(ctx)
	out := make([]*apiv1.Pod, 0, len(pods))
	tooNew := 0
	for _, p := range pods {
		old, err := oldEnoughForScaleUp(p, loop.Now, d.Delay)
		if err != nil {
			logger.Error(err, "Ignoring the pod's scale-up delay annotation", "pod", klog.KObj(p))
		}
		if !old {
			tooNew++
			continue
		}
		out = append(out, p)
	}
	if tooNew > 0 {
		logger.V(2).Info("Unschedulable pods too new to trigger a scale-up", "count", tooNew,
			"newPodScaleUpDelay", d.Delay)
	}
	return out
}

// PodScaleUpDelayAnnotation lets a pod wait longer than --new-pod-scale-up-delay
// before it can trigger a scale-up; it cannot shorten the wait.
const PodScaleUpDelayAnnotation = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"

// oldEnoughForScaleUp reports whether pod has waited its scale-up delay at
// now: the flag's default, or the pod's annotation when that is longer. An
// annotation that does not parse, or asks for less than the default, is
// reported as an error and the default applies.
func oldEnoughForScaleUp(pod *apiv1.Pod, now time.Time, defaultDelay time.Duration) (bool, error) {
	delay := defaultDelay
	var err error
	if v, ok := pod.Annotations[PodScaleUpDelayAnnotation]; ok {
		d, perr := time.ParseDuration(v)
		switch {
		case perr != nil:
			err = fmt.Errorf("annotation %s=%q is not a duration: %w", PodScaleUpDelayAnnotation, v, perr)
		case d < defaultDelay:
			err = fmt.Errorf("annotation %s=%q is shorter than --new-pod-scale-up-delay %v and is ignored",
				PodScaleUpDelayAnnotation, v, defaultDelay)
		default:
			delay = d
		}
	}
	if delay <= 0 {
		// No wait asked: a pod whose creation time is ahead of this clock
		// (the API server's clock runs ahead) triggers a scale-up at once
		// too, rather than after the skew.
		return true, err
	}
	return now.Sub(pod.CreationTimestamp.Time) >= delay, err
}
