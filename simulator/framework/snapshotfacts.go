package framework

import (
	"unsafe"

	apiv1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// What the last Reset was given, for the loop's other steps: the pods
// grouped by node (the scale-down planner needs the same grouping), and a
// version per node that says whether its Node object and pods changed.

// resetInput is the record of the pod list the last Reset was given: its
// length, a fingerprint of its pod addresses in order, and the grouping
// PodsByNode made of it.
type resetInput struct {
	pods   int
	print  uint64
	byNode map[string][]*apiv1.Pod
}

// podListPrint mixes the addresses of pods, in order, into one value. It
// reads no pod object: a few microseconds for 10,000 pods, where grouping
// them by node reads every pod's node name (milliseconds).
func podListPrint(pods []*apiv1.Pod) uint64 {
	h := uint64(14695981039346656037)
	for _, p := range pods {
		h ^= uint64(uintptr(unsafe.Pointer(p)))
		h *= 1099511628211
		h ^= h >> 29
	}
	return h
}

// ResetPodsByNode returns what PodsByNode(pods) returns, without grouping
// the pods again when pods is the list the last Reset was given (the same
// pod objects in the same order): then the Reset's grouping is returned and
// reused is true. The caller must not modify the map or its slices.
func (s *Snapshot) ResetPodsByNode(pods []*apiv1.Pod) (byNode map[string][]*apiv1.Pod, reused bool) {
	in := s.reuse.input
	if in.byNode != nil && in.pods == len(pods) && in.print == podListPrint(pods) {
		return in.byNode, true
	}
	return PodsByNode(pods), false
}

// NodeVersion stands for a node's Node object and set of pod objects as a
// Reset was given them. Two versions of a node are equal only when both
// Resets were given the same Node object and the same pod objects for it
// (the snapshot kept its NodeInfo: see keptNode). The zero NodeVersion is
// no version.
type NodeVersion struct{ ni *schedframework.NodeInfo }

// ResetNodeVersion returns the version of node name as the last Reset was
// given it, and false when that Reset did not hold the node.
func (s *Snapshot) ResetNodeVersion(name string) (NodeVersion, bool) {
	k, ok := s.reuse.prev[name]
	if !ok {
		return NodeVersion{}, false
	}
	return NodeVersion{ni: k.ni}, true
}

// ResetCount returns the number of the last Reset (NewSnapshot's is 1):
// a stamp for UnchangedSince.
func (s *Snapshot) ResetCount() uint64 { return s.reuse.resets }

// UnchangedSince reports whether node name has had the same Node object and
// the same pod objects in every Reset from the one numbered reset
// (ResetCount then) to the last: its NodeInfo was built at or before that
// Reset and kept since. A node the last Reset did not hold is not unchanged.
func (s *Snapshot) UnchangedSince(name string, reset uint64) bool {
	k, ok := s.reuse.prev[name]
	return ok && k.since != 0 && k.since <= reset
}

// ResetLayout stands for the names of the nodes the last Reset was given,
// in their order, which is the order of the snapshot's list: two Resets
// with the same layout put every node at the same place in it.
func (s *Snapshot) ResetLayout() uint64 { return s.reuse.content.layout }

// HasRequiredAntiAffinity reports whether a pod in the snapshot has a
// required anti-affinity term: such a pod can refuse a pod on nodes other
// than its own (a topology domain wider than one node).
func (s *Snapshot) HasRequiredAntiAffinity() bool {
	return len(s.lists().withRequiredAntiAffinity) > 0
}

// resetContent is what ContentSerial compares from one Reset to the next.
type resetContent struct {
	serial uint64
	nodes  int
	print  uint64
	// layout: the nodes' names in order (ResetLayout).
	layout uint64
	// plain is false when the snapshot holds what the plugins read beside
	// it (pods with PersistentVolumeClaims: the volume plugins read the
	// claims and volumes from the informers) or DRA objects.
	plain bool
}

// endReset records the content of the Reset that built list from nodes:
// the serial grows unless every NodeInfo was kept from the Reset before,
// for the same nodes in the same order.
func (r *nodeReuse) endReset(nodes []*apiv1.Node, list []fwk.NodeInfo) {
	h := uint64(14695981039346656037)
	for _, n := range nodes {
		h ^= uint64(uintptr(unsafe.Pointer(n)))
		h *= 1099511628211
		h ^= h >> 29
	}
	layout := r.content.layout
	if r.content.nodes != len(nodes) || r.content.print != h || layout == 0 {
		// Some Node object differs: read the names (the same objects in
		// the same order have the same names).
		layout = uint64(14695981039346656037)
		for _, n := range nodes {
			for i := 0; i < len(n.Name); i++ {
				layout ^= uint64(n.Name[i])
				layout *= 1099511628211
			}
			layout ^= 0xff // a name's end
			layout *= 1099511628211
		}
	}
	plain := true
	for _, ni := range list {
		if c, ok := ni.(*schedframework.NodeInfo); !ok || len(c.PVCRefCounts) > 0 {
			plain = false
			break
		}
	}
	same := r.built == 0 && r.content.nodes == len(nodes) && r.content.print == h && r.content.plain && plain
	if !same {
		r.content.serial++
	}
	r.content.nodes, r.content.print, r.content.plain, r.content.layout = len(nodes), h, plain, layout
}

// ContentSerial returns the serial of the snapshot's content and whether
// the snapshot holds exactly what its last Reset put in it (every change
// since reverted, none at the base level). Two calls on one Snapshot that
// both return pristine and the same serial saw the same nodes, pods and
// NodeInfos: the Resets between them kept every NodeInfo, for the same
// Node objects in the same order. A snapshot holding DRA objects, CSINodes
// of its own or pods with PersistentVolumeClaims (what the plugins read
// from elsewhere) is never pristine.
func (s *Snapshot) ContentSerial() (serial uint64, pristine bool) {
	c := s.reuse.content
	pristine = s.changes == 0 && c.plain && len(s.csiNodes) == 0 && len(s.dra.slices) == 0 &&
		len(s.dra.claims) == 0 && len(s.dra.classes) == 0 && len(s.dra.nodeSlices) == 0
	return c.serial, pristine
}
