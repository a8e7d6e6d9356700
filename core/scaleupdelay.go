package core

import (
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
)

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
	return now.Sub(pod.CreationTimestamp.Time) >= delay, err
}
