package expander

import (
	apiv1 "k8s.io/api/core/v1"
)

// amount is a quantity of name as an integer: millicores for cpu, the plain
// value (bytes for memory) for everything else.
func amount(list apiv1.ResourceList, name apiv1.ResourceName) int64 {
	q, ok := list[name]
	if !ok {
		return 0
	}
	if name == apiv1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// podRequest is the amount of resource name a pod holds on its node while it
// runs, as the scheduler counts it: the regular containers plus the sidecars
// (init containers with restartPolicy Always), or, when larger, the peak
// reached while the init containers run one after the other (each plus the
// sidecars started before it); then the pod overhead. The unit is amount's.
func podRequest(pod *apiv1.Pod, name apiv1.ResourceName) int64 {
	var running, sidecars, initPeak int64
	for _, c := range pod.Spec.InitContainers {
		req := amount(c.Resources.Requests, name)
		if c.RestartPolicy != nil && *c.RestartPolicy == apiv1.ContainerRestartPolicyAlways {
			sidecars += req
			req = sidecars
		} else {
			req += sidecars
		}
		initPeak = max(initPeak, req)
	}
	for _, c := range pod.Spec.Containers {
		running += amount(c.Resources.Requests, name)
	}
	return max(running+sidecars, initPeak) + amount(pod.Spec.Overhead, name)
}

// podsRequest sums podRequest over pods.
func podsRequest(pods []*apiv1.Pod, name apiv1.ResourceName) int64 {
	var sum int64
	for _, p := range pods {
		sum += podRequest(p, name)
	}
	return sum
}

// podUses reports whether any container of pod requests or limits resource name.
func podUses(pod *apiv1.Pod, name apiv1.ResourceName) bool {
	uses := func(cs []apiv1.Container) bool {
		for _, c := range cs {
			if amount(c.Resources.Requests, name) > 0 || amount(c.Resources.Limits, name) > 0 {
				return true
			}
		}
		return false
	}
	return uses(pod.Spec.Containers) || uses(pod.Spec.InitContainers)
}
