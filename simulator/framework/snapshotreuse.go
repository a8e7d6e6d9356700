package framework

import (
	"slices"
	"unsafe"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// newSnapshot builds the snapshot of nodes and pods (byNode: the pods
// grouped by node), keeping the NodeInfo of each node that reuse recorded
// with the same Node and pod objects.
func newSnapshot(nodes []*apiv1.Node, pods []*apiv1.Pod, byNode map[string][]*apiv1.Pod,
	podInfos *PodMemo[*schedframework.PodInfo], reuse *nodeReuse, dra draObjects) *Snapshot {
	s := &Snapshot{nodes: make(map[string]*schedframework.NodeInfo, len(nodes)), index: make(map[string]int64, len(nodes)),
		list: make([]fwk.NodeInfo, 0, len(nodes)), keys: make([]int64, 0, len(nodes)),
		logger: klog.Background(), podInfos: podInfos, reuse: reuse, dra: dra}
	if err := s.dra.load(); err != nil {
		// Pods with claims then find none and fit nowhere; the rest is simulated.
		s.logger.Error(err, "Simulating without the cluster's DRA objects")
	}
	reuse.input = resetInput{pods: len(pods), print: podListPrint(pods), byNode: byNode}
	reuse.reused, reuse.built = 0, 0
	for _, n := range nodes {
		on := byNode[n.Name]
		ni, old := reuse.kept(n, on)
		if ni == nil {
			ni = buildNodeInfo(n, on, old.ni, podInfos)
		}
		reuse.keep(n, on, ni, old)
		s.insert(n.Name, ni, s.newKey())
	}
	reuse.endReset(nodes, s.list)
	reuse.rotate()
	podInfos.Rotate()
	return s
}

// buildNodeInfo builds the NodeInfo of n running pods on, with the PodInfos
// old (the node's last NodeInfo, or nil) holds for the same pod objects.
func buildNodeInfo(n *apiv1.Node, on []*apiv1.Pod, old *schedframework.NodeInfo,
	podInfos *PodMemo[*schedframework.PodInfo]) *schedframework.NodeInfo {
	ni := schedframework.NewNodeInfo()
	if len(on) > 0 {
		ni.Pods = make([]fwk.PodInfo, 0, len(on)) // not grown pod by pod
	}
	for _, p := range on {
		pi := podInfoIn(old, p)
		if pi == nil {
			// As NodeInfo.AddPod: a pod whose affinity terms do not parse
			// is added with what could be parsed.
			pi = podInfos.Get(p, func(p *apiv1.Pod) *schedframework.PodInfo {
				pi, _ := schedframework.NewPodInfo(p)
				return pi
			})
		}
		ni.AddPodInfo(pi)
	}
	ni.SetNode(n)
	return ni
}

// Reset replaces the snapshot's content with nodes and their pods and drops
// every open level and every CSINode and ResourceSlice set on it; the DRA
// objects are listed again from the DRASource (SetDRASource). The scheduler
// framework keeps pointing at the same Snapshot, so a loop resets it instead
// of building a new one. A node whose Node object and set of pod objects
// are those of the last Reset keeps its NodeInfo (see keptNode); the others
// get new ones, with the PodInfos of the pods the last Reset held.
func (s *Snapshot) Reset(nodes []*apiv1.Node, pods []*apiv1.Pod) {
	observer, gen := s.observer, s.interPodGen
	*s = *newSnapshot(nodes, pods, s.reuse.groups.group(pods), s.podInfos, s.reuse, draObjects{source: s.dra.source, bind: s.dra.bind})
	s.observer, s.interPodGen = observer, gen+1
}

// keptNode is a node as the last Reset (or NewSnapshot) built it: the Node
// object, the addresses of its pod objects in ascending order, and the
// NodeInfo built from them. That NodeInfo is never modified: a change at
// the base level copies it first (writable), one in a Fork copies it anyway.
//
// The next Reset keeps the NodeInfo of a node given the same Node object and
// the same set of pod objects. Pointer identity is a sound test of "not
// changed" for informer objects: client-go's informers store every added or
// updated object as it was decoded (processDeltas: Update(obj) with the new
// object; a resync re-delivers the stored one) and never modify a stored
// object (informercache's transform shares parts between freshly decoded
// pods on that premise). A relist decodes every object anew: the Reset after
// it rebuilds every NodeInfo, as before. The addresses are of objects the
// kept NodeInfo holds, so none is freed and reused while it is kept.
type keptNode struct {
	node *apiv1.Node
	pods []uintptr
	ni   *schedframework.NodeInfo
	// on is the node's pods as the last Reset was given them: a part of
	// that Reset's grouping, which nobody modifies (see podGroups). The next
	// Reset given the very same part (same array, same place, same length:
	// the grouping was kept) needs not compare the addresses.
	on []*apiv1.Pod
	// since is the number of the Reset that built ni (nodeReuse.resets):
	// every Reset from it to the last one held ni for the node.
	since uint64
}

// nodeReuse carries the kept nodes from one Reset to the next.
type nodeReuse struct {
	prev, cur map[string]keptNode
	scratch   []uintptr
	// Reused and Built count the NodeInfos the last Reset kept and built.
	reused, built int
	// input is the pod list the last Reset was given (ResetPodsByNode).
	input resetInput
	// content is what ContentSerial compares.
	content resetContent
	// groups groups the pods by node from one Reset to the next.
	groups podGroups
	// resets counts the Resets that ended (ResetCount).
	resets uint64
}

// podAddrs writes the ascending addresses of pods into buf[:0].
func podAddrs(buf []uintptr, pods []*apiv1.Pod) []uintptr {
	buf = buf[:0]
	for _, p := range pods {
		buf = append(buf, uintptr(unsafe.Pointer(p)))
	}
	slices.Sort(buf)
	return buf
}

// kept returns the NodeInfo the last Reset built for node n with the same
// pods, or nil; old is that Reset's record of the node name, if any.
func (r *nodeReuse) kept(n *apiv1.Node, on []*apiv1.Pod) (ni *schedframework.NodeInfo, old keptNode) {
	old, ok := r.prev[n.Name]
	if !ok || old.node != n || len(old.pods) != len(on) {
		return nil, old
	}
	if len(on) > 0 && len(old.on) == len(on) && &old.on[0] == &on[0] {
		return old.ni, old
	}
	r.scratch = podAddrs(r.scratch, on)
	if !slices.Equal(r.scratch, old.pods) {
		return nil, old
	}
	return old.ni, old
}

// keep records ni, built from or kept for n and on, for the next Reset.
func (r *nodeReuse) keep(n *apiv1.Node, on []*apiv1.Pod, ni *schedframework.NodeInfo, old keptNode) {
	if r.cur == nil {
		r.cur = map[string]keptNode{}
	}
	if old.ni == ni {
		old.on = on // the current grouping's part: an older grouping is not held
		r.cur[n.Name] = old
		r.reused++
		return
	}
	r.cur[n.Name] = keptNode{node: n, pods: podAddrs(make([]uintptr, 0, len(on)), on), ni: ni, on: on, since: r.resets + 1}
	r.built++
}

// rotate ends a Reset: the nodes it recorded are the ones the next one may keep.
func (r *nodeReuse) rotate() {
	r.resets++
	old := r.prev
	clear(old)
	r.prev, r.cur = r.cur, old
}

// isKept reports whether ni is the NodeInfo the last Reset recorded for
// name, which must not be modified.
func (r *nodeReuse) isKept(name string, ni *schedframework.NodeInfo) bool {
	k, ok := r.prev[name]
	return ok && k.ni == ni
}

// keptPodInfo returns the PodInfo of pod in the NodeInfo the last Reset
// recorded for pod's node, if that NodeInfo holds pod.
func (r *nodeReuse) keptPodInfo(pod *apiv1.Pod) *schedframework.PodInfo {
	k, ok := r.prev[pod.Spec.NodeName]
	if !ok {
		return nil
	}
	return podInfoIn(k.ni, pod)
}

// podInfoIn finds the PodInfo of pod (the same object) in ni.
func podInfoIn(ni *schedframework.NodeInfo, pod *apiv1.Pod) *schedframework.PodInfo {
	if ni == nil {
		return nil
	}
	for _, pi := range ni.Pods {
		if pi.GetPod() == pod {
			if c, ok := pi.(*schedframework.PodInfo); ok {
				return c
			}
		}
	}
	return nil
}

// ReuseStats reports how many NodeInfos the last Reset kept from the one
// before and how many it built.
func (s *Snapshot) ReuseStats() (kept, built int) { return s.reuse.reused, s.reuse.built }
