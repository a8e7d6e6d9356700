package drain

import apiv1 "k8s.io/api/core/v1"

// onCompletionRule blocks the node while a pod annotated safe-to-evict:
// "on-completion" still runs: it is never evicted, the node waits for it to
// finish (a finished one was already left by terminalRule).
type onCompletionRule struct{}

func (onCompletionRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	if pod.Annotations[SafeToEvictAnnotation] == safeToEvictOnCompletion {
		return blocked(BlockedByOnCompletion, "pod %s/%s is annotated %s=%s and has not completed",
			pod.Namespace, pod.Name, SafeToEvictAnnotation, safeToEvictOnCompletion)
	}
	return outcome{}
}
