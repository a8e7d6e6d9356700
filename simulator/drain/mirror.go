package drain

import apiv1 "k8s.io/api/core/v1"

// IsMirrorPod reports whether p is the API mirror of a static pod: the kubelet
// owns it, eviction cannot remove it, and it goes away with its node.
func IsMirrorPod(p *apiv1.Pod) bool {
	_, ok := p.Annotations[apiv1.MirrorPodAnnotationKey]
	return ok
}

// mirrorRule leaves mirror pods on the node.
type mirrorRule struct{}

func (mirrorRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	if IsMirrorPod(pod) {
		return outcome{verdict: leave}
	}
	return outcome{}
}
