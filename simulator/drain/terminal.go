package drain

import apiv1 "k8s.io/api/core/v1"

// terminalRule leaves pods that have finished (phase Succeeded or Failed) on
// the node: they will never run again, so they need no new home and block
// nothing.
type terminalRule struct{}

func (terminalRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	if isTerminal(pod) {
		return outcome{verdict: leave}
	}
	return outcome{}
}

func isTerminal(pod *apiv1.Pod) bool {
	return pod.Status.Phase == apiv1.PodSucceeded || pod.Status.Phase == apiv1.PodFailed
}
