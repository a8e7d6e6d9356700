package drain

import apiv1 "k8s.io/api/core/v1"

// IsDaemonSetPod reports whether p belongs to a DaemonSet: its controller is
// of kind DaemonSet (any API group), or it carries the annotation
// cluster-autoscaler.kubernetes.io/daemonset-pod: "true".
func IsDaemonSetPod(p *apiv1.Pod) bool {
	if ref := controllerRefOf(p); ref != nil && ref.Kind == kindDaemonSet {
		return true
	}
	return p.Annotations[DaemonSetPodAnnotation] == "true"
}

// EvictDaemonSetPod says whether the actuator should evict DaemonSet pod p
// before deleting its node: the annotation
// cluster-autoscaler.kubernetes.io/enable-ds-eviction ("true" or "false")
// wins over flagDefault, the value of --daemonset-eviction-for-empty-nodes or
// --daemonset-eviction-for-occupied-nodes; any other value is ignored.
func EvictDaemonSetPod(p *apiv1.Pod, flagDefault bool) bool {
	switch p.Annotations[EnableDSEvictionAnnotation] {
	case "true":
		return true
	case "false":
		return false
	}
	return flagDefault
}

// daemonSetRule leaves DaemonSet pods on the node: they need no new home, and
// they never block, whether or not their DaemonSet still exists.
type daemonSetRule struct{}

func (daemonSetRule) check(pod *apiv1.Pod, _ *classifyEnv) outcome {
	if IsDaemonSetPod(pod) {
		return outcome{verdict: leave}
	}
	return outcome{}
}
