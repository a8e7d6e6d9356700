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
// the others dropped. The dropped map is cleared and reused (it keeps its
// room), so that a loop does not allocate a map of every pod anew.
func (m *PodMemo[T]) Rotate() {
	old := m.prev
	clear(old)
	if old == nil {
		old = make(map[*apiv1.Pod]T, len(m.cur))
	}
	m.prev, m.cur = m.cur, old
}

// PodsByNode groups the pods that name a node by that name, each node's
// pods in their order. The groups are parts of one array of all the pods,
// each with no room past its end (an append to one copies it), so that a
// loop does not grow a slice per node pod by pod; each pod's node name is
// hashed once.
func PodsByNode(pods []*apiv1.Pod) map[string][]*apiv1.Pod {
	index := make(map[string]int)
	var names []string
	var counts []int
	of := make([]int32, len(pods)) // the node index of each pod, -1: none
	for i, p := range pods {
		name := p.Spec.NodeName
		if name == "" {
			of[i] = -1
			continue
		}
		k, ok := index[name]
		if !ok {
			k = len(names)
			index[name] = k
			names, counts = append(names, name), append(counts, 0)
		}
		of[i] = int32(k)
		counts[k]++
	}
	next := make([]int, len(names)) // where the node's next pod goes
	total := 0
	for k, n := range counts {
		next[k] = total
		total += n
	}
	all := make([]*apiv1.Pod, total)
	for i, p := range pods {
		if k := of[i]; k >= 0 {
			all[next[k]] = p
			next[k]++
		}
	}
	out := make(map[string][]*apiv1.Pod, len(names))
	for k, name := range names {
		end := next[k]
		out[name] = all[end-counts[k] : end : end]
	}
	return out
}
