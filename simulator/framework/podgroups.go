package framework

import apiv1 "k8s.io/api/core/v1"

// podGroups groups pods by node name as PodsByNode does, from one Reset to
// the next, reading only the pod objects it has not seen before: a pod
// object it saw names the same node (informers replace a changed object and
// never modify one, see keptNode), so its node is looked up by the
// object's address. A list holding exactly the pod objects of the last one
// (in any order) gets the last grouping back, each node's pods in the order
// of the list that grouping was made from; any other list gets a new
// grouping, in its own order, as PodsByNode makes it.
//
// The pods it knows are keys of a map, which keeps them alive: an address
// it knows is never that of another object. It costs a map entry per pod,
// and a map lookup per pod and Reset where PodsByNode reads every pod's
// node name and hashes it.
type podGroups struct {
	// slot is where each known pod's entry is in entries.
	slot    map[*apiv1.Pod]int32
	entries []podEntry
	free    []int32
	// names are the node names the entries point to, index their positions.
	names []string
	index map[string]int32
	// gen counts the calls; an entry seen in the current one has it.
	gen uint32
	// last is the last grouping returned.
	last map[string][]*apiv1.Pod
	// of is scratch: the node (index in names, -1: none) of each pod.
	of []int32
}

// podGroupsNameSlack is how many node names past twice the nodes grouped
// podGroups keeps before it starts over.
var podGroupsNameSlack = 1024

type podEntry struct {
	node int32 // index in names, -1: no node
	seen uint32
}

// group returns the grouping of pods by node name. The caller must not
// modify the map or its slices.
func (g *podGroups) group(pods []*apiv1.Pod) map[string][]*apiv1.Pod {
	if g.slot == nil || len(g.names) > 2*len(g.last)+podGroupsNameSlack {
		// First call, or more node names than nodes (churn): start over.
		*g = podGroups{slot: make(map[*apiv1.Pod]int32, len(pods)), index: map[string]int32{}, gen: g.gen, of: g.of}
	}
	g.gen++
	if cap(g.of) < len(pods) {
		g.of = make([]int32, len(pods))
	}
	of := g.of[:len(pods)]
	known, added := 0, 0 // distinct pods of the list known before, and new
	for i, p := range pods {
		s, ok := g.slot[p]
		switch {
		case !ok:
			s = g.add(p)
			added++
		case g.entries[s].seen != g.gen:
			known++
		}
		g.entries[s].seen = g.gen
		of[i] = g.entries[s].node
	}
	unchanged := g.last != nil && known == len(pods) && known == len(g.slot)
	if known+added < len(g.slot) {
		g.forgetUnseen()
	}
	if unchanged {
		return g.last
	}
	g.last = groupByIndex(pods, of, g.names)
	return g.last
}

// add records a pod not seen before, reading its node name.
func (g *podGroups) add(p *apiv1.Pod) int32 {
	node := int32(-1)
	if name := p.Spec.NodeName; name != "" {
		k, ok := g.index[name]
		if !ok {
			k = int32(len(g.names))
			g.index[name] = k
			g.names = append(g.names, name)
		}
		node = k
	}
	var s int32
	if n := len(g.free); n > 0 {
		s, g.free = g.free[n-1], g.free[:n-1]
		g.entries[s] = podEntry{node: node}
	} else {
		s = int32(len(g.entries))
		g.entries = append(g.entries, podEntry{node: node})
	}
	g.slot[p] = s
	return s
}

// forgetUnseen drops the pods the current call was not given.
func (g *podGroups) forgetUnseen() {
	for p, s := range g.slot {
		if g.entries[s].seen != g.gen {
			delete(g.slot, p)
			g.free = append(g.free, s)
		}
	}
}

// groupByIndex groups pods by the node of, the index of each pod's node
// name in names (-1: none), as PodsByNode does.
func groupByIndex(pods []*apiv1.Pod, of []int32, names []string) map[string][]*apiv1.Pod {
	counts := make([]int, len(names))
	for _, k := range of {
		if k >= 0 {
			counts[k]++
		}
	}
	next := make([]int, len(names)) // where the node's next pod goes
	total, nodes := 0, 0
	for k, n := range counts {
		next[k] = total
		total += n
		if n > 0 {
			nodes++
		}
	}
	all := make([]*apiv1.Pod, total)
	for i, p := range pods {
		if k := of[i]; k >= 0 {
			all[next[k]] = p
			next[k]++
		}
	}
	out := make(map[string][]*apiv1.Pod, nodes)
	for k, n := range counts {
		if n > 0 {
			end := next[k]
			out[names[k]] = all[end-n : end : end]
		}
	}
	return out
}
