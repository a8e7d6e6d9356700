package drain

import apiv1 "k8s.io/api/core/v1"

// notSafeToEvictRule blocks the node of a pod annotated safe-to-evict: "false".
type notSafeToEvictRule struct{}

func (notSafeToEvictRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	if pod.Annotations[SafeToEvictAnnotation] == safeToEvictFalse {
		return blocked(NotSafeToEvictAnnotation, "pod %s/%s is annotated %s=%s",
			pod.Namespace, pod.Name, SafeToEvictAnnotation, safeToEvictFalse)
	}
	return outcome{}
}
