package framework

import apiv1 "k8s.io/api/core/v1"

// PodMemo remembers a value computed from a pod for as long as the
// informers hand out the same pod object: an informer replaces the object
// (a new pointer) when the pod changes and never modifies it, so the
// pointer is a key that cannot go stale. A loop asks for the values of the
// pods it sees, then calls Rotate: what the last loop did not ask for is
// forgotten, so the memo holds at most two loops' worth of pods.
//
// Values computed from a pod object built inside the loop (a copy, a
// template's pod) are remembered too; they are forgotten after one Rotate.
type PodMemo[T any] struct {
	prev, cur map[*apiv1.Pod]T
}

// Get returns the remembered value for pod, or computes and remembers it.
func (m *PodMemo[T]) Get(pod *apiv1.Pod, compute func(*apiv1.Pod) T) T {
	if v, ok := m.cur[pod]; ok {
		return v
	}
	if m.cur == nil {
		m.cur = map[*apiv1.Pod]T{}
	}
	v, ok := m.prev[pod]
	if !ok {
		v = compute(pod)
	}
	m.cur[pod] = v
	return v
}

// Rotate ends a loop: the values asked for since the last Rotate are kept,
// the others dropped.
func (m *PodMemo[T]) Rotate() {
	m.prev, m.cur = m.cur, make(map[*apiv1.Pod]T, len(m.cur))
}
