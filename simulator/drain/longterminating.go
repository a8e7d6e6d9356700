package drain

import (
	"time"

	apiv1 "k8s.io/api/core/v1"
)

// longTerminatingMargin is how long past its grace period a terminating pod
// is still waited for.
const longTerminatingMargin = 30 * time.Second

// longTerminatingRule leaves on the node the pods that have been terminating
// for longer than their grace period plus longTerminatingMargin, counted from
// the deletion timestamp: they are as good as gone, and waiting for them
// would keep the node forever.
//
// The API server already sets the deletion timestamp to the deletion request
// plus the grace period granted, so the pod's own grace has run out by then;
// the grace added on top is capped at maxGraceSec (--max-graceful-termination-sec,
// the longest the actuator ever waits for a pod it evicts) when positive.
type longTerminatingRule struct {
	maxGraceSec int
}

func (r longTerminatingRule) check(pod *apiv1.Pod, env *classifyEnv) outcome {
	if r.isLongTerminating(pod, env.now) {
		return outcome{verdict: leave}
	}
	return outcome{}
}

func (r longTerminatingRule) isLongTerminating(pod *apiv1.Pod, now time.Time) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	graceSec := int64(apiv1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		graceSec = *pod.Spec.TerminationGracePeriodSeconds
	}
	if r.maxGraceSec > 0 && graceSec > int64(r.maxGraceSec) {
		graceSec = int64(r.maxGraceSec)
	}
	if graceSec < 0 {
		graceSec = 0
	}
	deadline := pod.DeletionTimestamp.Add(time.Duration(graceSec)*time.Second + longTerminatingMargin)
	return now.After(deadline)
}
