package drain

import apiv1 "k8s.io/api/core/v1"

// safeToEvictRule moves pods annotated safe-to-evict: "true", skipping the
// blocking rules (not replicated, kube-system, safe-to-evict "false", local
// storage). The PDB budget still applies to them (see Rules).
type safeToEvictRule struct{}

func (safeToEvictRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	if pod.Annotations[SafeToEvictAnnotation] == safeToEvictTrue {
		return outcome{verdict: move}
	}
	return outcome{}
}
