package framework

import (
	"errors"
	"fmt"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// ErrNodeNotFound is returned for a node the snapshot does not hold.
var ErrNodeNotFound = errors.New("node not found in snapshot")

// Snapshot is an in-memory cluster that implements the scheduler's
// SharedLister. Fork opens a what-if level; Revert undoes everything since
// the matching Fork and Commit keeps it. Both cost O(changes): each change
// records how to undo itself, and a node's NodeInfo is copied at most once
// per level, the first time that level changes it. The base level (no Fork
// open) copies the NodeInfos that Reset kept from the loop before, which
// the next Reset may keep again, the first time it changes them.
type Snapshot struct {
	nodes map[string]*schedframework.NodeInfo
	list  []fwk.NodeInfo // the same NodeInfos, in insertion order
	// keys[i] is list[i]'s insertion key, ascending, and index maps a node
	// name to its key: a node's position is found by binary search, so that
	// removing a node moves the list's tail in memory but rewrites no map
	// entry (a simulation removing 2,000 of 15,000 nodes re-indexed the
	// nodes after each one).
	keys    []int64
	index   map[string]int64
	nextKey int64

	undo    []undoEntry
	markers []int             // len(undo) at each open Fork
	copied  []map[string]bool // per open level: nodes already copied in it
	// cache holds the lists of the nodes running pods with inter-pod
	// terms, rebuilt lazily after a change that may alter them (see
	// dropListsFor): most changes (a pod without such terms placed on a
	// node without any) leave them as they are, so that every pod a
	// simulation places does not rebuild them from all the nodes.
	cache *listCache
	// interPodGen counts the changes that may alter those lists (whether
	// or not they were built): a PreFilter result that read them (the
	// InterPodAffinity plugin's) holds while it is unchanged (CheckMemo).
	// It only grows, across Resets too.
	interPodGen uint64
	logger      klog.Logger

	csiNodes map[string]*storagev1.CSINode // simulated nodes' own CSINodes (SetCSINode)
	dra      draObjects                    // ResourceSlices, ResourceClaims, DeviceClasses

	// podInfos keeps the scheduler's PodInfo of pods analysed for a NodeInfo
	// a Reset built, or for AddPodLike, from one Reset to the next (the
	// NodeInfos a Reset keeps hold their pods' own). PodInfos are never
	// modified once built, so NodeInfos of successive loops share them.
	podInfos *PodMemo[*schedframework.PodInfo]
	// reuse holds the NodeInfos the last Reset built, which the next one
	// keeps for unchanged nodes; they are copied before any change.
	reuse *nodeReuse

	observer StepObserver // times Fork, Commit and Revert (SetStepObserver)

	// changes counts the changes to the nodes since the Reset that are not
	// reverted; changeMarks holds its value at each open Fork
	// (ContentSerial).
	changes     uint64
	changeMarks []uint64
}

type undoKind int

const (
	undoReplace undoKind = iota // restore the previous NodeInfo pointer
	undoAdd                     // remove an added node
	undoRemove                  // re-insert a removed node at its position
	undoCSINode                 // restore a node's own CSINode (or its absence)
	undoClaim                   // restore a ResourceClaim (or its absence)
	undoSlices                  // restore a node's own ResourceSlices (or their absence)
)

type undoEntry struct {
	kind undoKind
	name string
	old  *schedframework.NodeInfo
	key  int64 // a removed node's insertion key, which puts it back in place

	csi    *storagev1.CSINode
	hadCSI bool

	claim     claimKey
	oldClaim  *resourceapi.ResourceClaim
	hadClaim  bool
	slices    []*resourceapi.ResourceSlice
	hadSlices bool
}

type listCache struct {
	withAffinity, withRequiredAntiAffinity []fwk.NodeInfo
}

var _ fwk.SharedLister = (*Snapshot)(nil)

// NewSnapshot builds a snapshot of nodes and the pods scheduled on them;
// pods naming a node the snapshot does not hold are ignored.
func NewSnapshot(nodes []*apiv1.Node, pods []*apiv1.Pod) *Snapshot {
	return newSnapshot(nodes, pods, PodsByNode(pods), &PodMemo[*schedframework.PodInfo]{}, &nodeReuse{}, draObjects{})
}

// SetDRASource makes the snapshot hold the DRA objects of src from the next
// Reset on.
func (s *Snapshot) SetDRASource(src DRASource) { s.dra.source = src }

// Fork opens a what-if level.
func (s *Snapshot) Fork() {
	defer s.timeStep(StepFork)()
	s.markers = append(s.markers, len(s.undo))
	s.copied = append(s.copied, map[string]bool{})
	s.changeMarks = append(s.changeMarks, s.changes)
}

// Revert undoes every change since the last Fork and closes that level.
func (s *Snapshot) Revert() {
	if len(s.markers) == 0 {
		panic("snapshot: Revert without Fork")
	}
	defer s.timeStep(StepRevert)()
	mark := s.markers[len(s.markers)-1]
	for i := len(s.undo) - 1; i >= mark; i-- {
		e := s.undo[i]
		switch e.kind {
		case undoReplace:
			s.dropListsFor(s.nodes[e.name], false)
			s.dropListsFor(e.old, false)
			s.nodes[e.name] = e.old
			s.list[s.pos(e.name)] = e.old
		case undoAdd:
			s.dropListsFor(s.nodes[e.name], false)
			s.remove(e.name)
		case undoRemove:
			s.dropListsFor(e.old, false)
			s.insert(e.name, e.old, e.key)
		case undoCSINode:
			s.setCSI(e.name, e.csi, e.hadCSI)
		case undoClaim:
			s.restoreClaim(e.claim, e.oldClaim, e.hadClaim)
		case undoSlices:
			s.setSlices(e.name, e.slices, e.hadSlices)
		}
	}
	s.undo = s.undo[:mark]
	s.markers = s.markers[:len(s.markers)-1]
	s.copied = s.copied[:len(s.copied)-1]
	s.changes = s.changeMarks[len(s.changeMarks)-1]
	s.changeMarks = s.changeMarks[:len(s.changeMarks)-1]
}

// Commit keeps the changes since the last Fork and closes that level; an
// enclosing level can still revert them.
func (s *Snapshot) Commit() {
	if len(s.markers) == 0 {
		panic("snapshot: Commit without Fork")
	}
	defer s.timeStep(StepCommit)()
	top := s.copied[len(s.copied)-1]
	s.changeMarks = s.changeMarks[:len(s.changeMarks)-1]
	s.markers = s.markers[:len(s.markers)-1]
	s.copied = s.copied[:len(s.copied)-1]
	if len(s.markers) == 0 {
		s.undo = s.undo[:0]
		return
	}
	// Nodes copied in the closed level are private to the enclosing one too:
	// its undo entries restore the pointers from before either level.
	outer := s.copied[len(s.copied)-1]
	for name := range top {
		outer[name] = true
	}
}

// Forked reports whether a what-if level is open.
func (s *Snapshot) Forked() bool { return len(s.markers) > 0 }

// writable returns the NodeInfo of name that the current level may change;
// adding says whether the change may add a pod with inter-pod terms.
func (s *Snapshot) writable(name string, adding bool) (*schedframework.NodeInfo, error) {
	ni, ok := s.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNodeNotFound, name)
	}
	s.dropListsFor(ni, adding)
	s.changes++
	if len(s.markers) == 0 {
		if !s.reuse.isKept(name, ni) {
			return ni, nil
		}
		// The next Reset may keep this NodeInfo: change a copy (that the
		// affinity lists may hold ni is handled as for a Fork's copy).
		clone := ni.SnapshotConcrete()
		s.nodes[name] = clone
		s.list[s.pos(name)] = clone
		return clone, nil
	}
	level := s.copied[len(s.copied)-1]
	if level[name] {
		return ni, nil
	}
	clone := ni.SnapshotConcrete()
	s.undo = append(s.undo, undoEntry{kind: undoReplace, name: name, old: ni})
	s.nodes[name] = clone
	s.list[s.pos(name)] = clone
	level[name] = true
	return clone, nil
}

// AddNode adds node with pods already running on it (e.g. DaemonSet pods of a template).
func (s *Snapshot) AddNode(node *apiv1.Node, pods ...*apiv1.Pod) error {
	if _, dup := s.nodes[node.Name]; dup {
		return fmt.Errorf("node %s already in snapshot", node.Name)
	}
	ni := schedframework.NewNodeInfo()
	ni.SetNode(node)
	for _, p := range pods {
		p = withNodeName(p, node.Name)
		ni.AddPod(p)
	}
	s.add(node.Name, ni)
	return nil
}

// CopyNode adds node running copies of the pods node src runs, bound to
// node: a twin of src for the Filter plugins. The copies keep the pods'
// identities (they are shallow copies that differ in Spec.NodeName), so a
// pod of a twin is not a distinct API object; simulations use twins to stand
// for nodes running other, equivalent pods.
func (s *Snapshot) CopyNode(src string, node *apiv1.Node) error {
	from, ok := s.nodes[src]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNodeNotFound, src)
	}
	if _, dup := s.nodes[node.Name]; dup {
		return fmt.Errorf("node %s already in snapshot", node.Name)
	}
	ni := schedframework.NewNodeInfo()
	ni.SetNode(node)
	if c, ok := s.csiNodes[src]; ok {
		s.SetCSINode(node.Name, RenamedCSINode(c, node.Name))
	}
	if sl := s.ResourceSlices(src); len(sl) > 0 {
		s.SetResourceSlices(node.Name, RenamedResourceSlices(sl, src, node.Name))
	}
	for _, pi := range from.Pods {
		if c, ok := pi.(*schedframework.PodInfo); ok {
			cp := *c // keeps the cached resources
			cp.Pod = withNodeName(c.Pod, node.Name)
			ni.AddPodInfo(&cp)
			continue
		}
		ni.AddPod(withNodeName(pi.GetPod(), node.Name))
	}
	s.add(node.Name, ni)
	return nil
}

// add appends a new node's NodeInfo, recording how to undo it.
func (s *Snapshot) add(name string, ni *schedframework.NodeInfo) {
	s.changes++
	s.insert(name, ni, s.newKey())
	if len(s.markers) > 0 {
		s.undo = append(s.undo, undoEntry{kind: undoAdd, name: name})
		s.copied[len(s.copied)-1][name] = true
	}
	s.dropListsFor(ni, false)
}

// RemoveNode removes a node and its pods, releasing their claims as
// RemovePod does.
func (s *Snapshot) RemoveNode(name string) error {
	ni, ok := s.nodes[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNodeNotFound, name)
	}
	for _, pi := range ni.Pods {
		s.releaseClaims(pi.GetPod(), name)
	}
	key := s.index[name]
	s.changes++
	s.remove(name)
	if len(s.markers) > 0 {
		s.undo = append(s.undo, undoEntry{kind: undoRemove, name: name, old: ni, key: key})
	}
	if _, ok := s.csiNodes[name]; ok {
		s.SetCSINode(name, nil)
	}
	if _, ok := s.dra.nodeSlices[name]; ok {
		s.SetResourceSlices(name, nil)
	}
	s.dropListsFor(ni, false)
	return nil
}

// AddPod places pod on node (a simulated binding).
// A pod with resource claims gets them allocated on the node first (see
// Handle); an error then leaves the snapshot without the pod.
func (s *Snapshot) AddPod(pod *apiv1.Pod, nodeName string) error {
	if err := s.bindClaims(pod, nodeName); err != nil {
		return err
	}
	ni, err := s.writable(nodeName, hasInterPodTerms(pod))
	if err != nil {
		return err
	}
	ni.AddPod(withNodeName(pod, nodeName))
	return nil
}

// RemovePod takes pod off node and releases its claims there (see
// releaseClaims): placed again, the pod gets them allocated anew.
func (s *Snapshot) RemovePod(pod *apiv1.Pod, nodeName string) error {
	ni, err := s.writable(nodeName, false)
	if err != nil {
		return err
	}
	if err := ni.RemovePod(s.logger, withNodeName(pod, nodeName)); err != nil {
		return err
	}
	s.releaseClaims(pod, nodeName)
	return nil
}

// bindClaims allocates and reserves pod's claims on node, if pod has any
// and the snapshot belongs to a Handle.
func (s *Snapshot) bindClaims(pod *apiv1.Pod, nodeName string) error {
	if len(pod.Spec.ResourceClaims) == 0 || s.dra.bind == nil {
		return nil
	}
	if _, ok := s.nodes[nodeName]; !ok {
		return fmt.Errorf("%w: %s", ErrNodeNotFound, nodeName)
	}
	return s.dra.bind(pod, nodeName)
}

// NodeInfo returns the node and its pods as the scheduler sees them.
func (s *Snapshot) NodeInfo(name string) (*schedframework.NodeInfo, error) {
	ni, ok := s.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNodeNotFound, name)
	}
	return ni, nil
}

// Pods returns the pods the snapshot places on node name. Pods placed by
// PodCheck.PlaceOn are the pending pods themselves, without a node name.
func (s *Snapshot) Pods(name string) ([]*apiv1.Pod, error) {
	ni, err := s.NodeInfo(name)
	if err != nil {
		return nil, err
	}
	out := make([]*apiv1.Pod, 0, len(ni.Pods))
	for _, p := range ni.Pods {
		out = append(out, p.GetPod())
	}
	return out, nil
}

// NodeNames lists the nodes in insertion order.
func (s *Snapshot) NodeNames() []string {
	out := make([]string, len(s.list))
	for i, ni := range s.list {
		out[i] = ni.Node().Name
	}
	return out
}

// Len is the number of nodes.
func (s *Snapshot) Len() int { return len(s.list) }

// newKey returns the insertion key of a node added now: after every other.
func (s *Snapshot) newKey() int64 {
	s.nextKey++
	return s.nextKey
}

// Position returns the index of node name in the snapshot's list (the
// order FitFrom walks and its hint counts in), false when there is none.
func (s *Snapshot) Position(name string) (int, bool) {
	if _, ok := s.index[name]; !ok {
		return 0, false
	}
	return s.pos(name), true
}

// pos is the position in list of node name, which the snapshot holds.
func (s *Snapshot) pos(name string) int {
	key := s.index[name]
	i, _ := slices.BinarySearch(s.keys, key)
	return i
}

// insert puts ni in list where its insertion key belongs.
func (s *Snapshot) insert(name string, ni *schedframework.NodeInfo, key int64) {
	pos, _ := slices.BinarySearch(s.keys, key)
	s.list = slices.Insert(s.list, pos, fwk.NodeInfo(ni))
	s.keys = slices.Insert(s.keys, pos, key)
	s.nodes[name] = ni
	s.index[name] = key
}

func (s *Snapshot) remove(name string) {
	pos := s.pos(name)
	s.list = slices.Delete(s.list, pos, pos+1)
	s.keys = slices.Delete(s.keys, pos, pos+1)
	delete(s.nodes, name)
	delete(s.index, name)
}

// withNodeName returns pod bound to nodeName. The copy is shallow: the
// snapshot never changes a pod, so maps and slices are shared.
func withNodeName(pod *apiv1.Pod, nodeName string) *apiv1.Pod {
	if pod.Spec.NodeName == nodeName {
		return pod
	}
	p := *pod
	p.Spec.NodeName = nodeName
	return &p
}

// PodShape is the scheduler's view of a pod (requests, affinity terms),
// computed once and shared by the equivalent pods of a group.
type PodShape struct{ info *schedframework.PodInfo }

// NewPodShape computes the shape of representative.
func NewPodShape(representative *apiv1.Pod) (*PodShape, error) {
	pi, err := schedframework.NewPodInfo(representative)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", representative.Namespace, representative.Name, err)
	}
	pi.CalculateResource() // cached in pi, and in every copy of it
	return &PodShape{info: pi}, nil
}

// bind returns the PodInfo of pod, one of the pods shape stands for, bound to nodeName.
func (sh *PodShape) bind(pod *apiv1.Pod, nodeName string) *schedframework.PodInfo {
	pi := *sh.info
	pi.Pod = withNodeName(pod, nodeName)
	return &pi
}

// AddPodShaped places pod, whose shape is shape, on node: the same as AddPod
// without recomputing what the group's pods share.
func (s *Snapshot) AddPodShaped(shape *PodShape, pod *apiv1.Pod, nodeName string) error {
	if err := s.bindClaims(pod, nodeName); err != nil {
		return err
	}
	ni, err := s.writable(nodeName, hasInterPodTerms(shape.info.Pod))
	if err != nil {
		return err
	}
	ni.AddPodInfo(shape.bind(pod, nodeName))
	return nil
}

// AddPodLike places pod, a copy of original that differs from it at most
// in its node name, on node: the same as AddPod, with the scheduler's view
// of original (requests, affinity terms) that the snapshot keeps for the
// pods of its last Reset instead of analysing the copy again. A drain
// simulation moves every pod of a candidate this way.
func (s *Snapshot) AddPodLike(pod, original *apiv1.Pod, nodeName string) error {
	pi := s.reuse.keptPodInfo(original)
	if pi == nil {
		pi = s.podInfos.Get(original, func(p *apiv1.Pod) *schedframework.PodInfo {
			pi, _ := schedframework.NewPodInfo(p) // as NodeInfo.AddPod: what could be parsed
			return pi
		})
	}
	pi.CalculateResource() // cached in pi (already, for a pod of the last Reset)
	return s.AddPodShaped(&PodShape{info: pi}, pod, nodeName)
}

// AddPodsShaped places pods, all of shape, on node.
func (s *Snapshot) AddPodsShaped(shape *PodShape, pods []*apiv1.Pod, nodeName string) error {
	ni, err := s.writable(nodeName, hasInterPodTerms(shape.info.Pod))
	if err != nil {
		return err
	}
	for _, p := range pods {
		if err := s.bindClaims(p, nodeName); err != nil {
			return err
		}
		ni.AddPodInfo(shape.bind(p, nodeName))
	}
	return nil
}

// NodeInfos implements fwk.SharedLister.
func (s *Snapshot) NodeInfos() fwk.NodeInfoLister { return nodeInfoLister{s} }

// StorageInfos implements fwk.SharedLister.
func (s *Snapshot) StorageInfos() fwk.StorageInfoLister { return storageInfoLister{s} }

// PodGroupStates implements fwk.SharedLister; pod groups (gang scheduling)
// are not simulated.
func (s *Snapshot) PodGroupStates() fwk.PodGroupStateLister { return podGroupStateLister{} }

type nodeInfoLister struct{ s *Snapshot }

func (l nodeInfoLister) List() ([]fwk.NodeInfo, error) { return l.s.list, nil }

func (l nodeInfoLister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return l.s.lists().withAffinity, nil
}

func (l nodeInfoLister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return l.s.lists().withRequiredAntiAffinity, nil
}

func (l nodeInfoLister) Get(name string) (fwk.NodeInfo, error) {
	ni, ok := l.s.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNodeNotFound, name)
	}
	return ni, nil
}

// dropListsFor forgets the affinity lists (and counts a change in
// interPodGen) when ni, a NodeInfo about to be
// changed, replaced, added or removed, is or may become part of them: it
// runs pods with inter-pod terms, or adding says a pod with such terms may
// be added to it. The lists hold NodeInfo pointers, so a NodeInfo in them
// that is replaced (copied on write) drops them too.
func (s *Snapshot) dropListsFor(ni *schedframework.NodeInfo, adding bool) {
	if adding || ni == nil || len(ni.GetPodsWithAffinity()) > 0 || len(ni.GetPodsWithRequiredAntiAffinity()) > 0 {
		s.cache = nil
		s.interPodGen++
	}
}

// hasInterPodTerms reports whether pod has pod affinity or anti-affinity,
// which puts its node in the scheduler's affinity lists.
func hasInterPodTerms(pod *apiv1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

func (s *Snapshot) lists() *listCache {
	if s.cache != nil {
		return s.cache
	}
	c := &listCache{}
	for _, ni := range s.list {
		if len(ni.GetPodsWithAffinity()) > 0 {
			c.withAffinity = append(c.withAffinity, ni)
		}
		if len(ni.GetPodsWithRequiredAntiAffinity()) > 0 {
			c.withRequiredAntiAffinity = append(c.withRequiredAntiAffinity, ni)
		}
	}
	s.cache = c
	return c
}

type storageInfoLister struct{ s *Snapshot }

func (l storageInfoLister) IsPVCUsedByPods(key string) bool {
	for _, ni := range l.s.list {
		if ni.GetPVCRefCounts()[key] > 0 {
			return true
		}
	}
	return false
}

type podGroupStateLister struct{}

func (podGroupStateLister) Get(namespace, name string) (fwk.PodGroupState, error) {
	return nil, fmt.Errorf("pod group %s/%s: pod groups are not simulated", namespace, name)
}

// Free returns what node name has left of its allocatable cpu (milli),
// memory (bytes) and pod slots, given the pods the snapshot places there.
func (s *Snapshot) Free(name string) (milliCPU, memory int64, pods int, err error) {
	ni, ok := s.nodes[name]
	if !ok {
		return 0, 0, 0, fmt.Errorf("%w: %s", ErrNodeNotFound, name)
	}
	milliCPU, memory, pods = free(ni)
	return milliCPU, memory, pods, nil
}

func free(ni *schedframework.NodeInfo) (milliCPU, memory int64, pods int) {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	return alloc.GetMilliCPU() - used.GetMilliCPU(), alloc.GetMemory() - used.GetMemory(),
		int(alloc.GetAllowedPodNumber()) - len(ni.GetPods())
}

// Request is what a pod asks of a node, for HasRoom.
type Request struct{ MilliCPU, Memory int64 }

// RequestOf returns the cpu and memory pod requests (init containers,
// sidecars and overhead included).
func RequestOf(pod *apiv1.Pod) Request {
	rl := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return Request{MilliCPU: rl.Cpu().MilliValue(), Memory: rl.Memory().Value()}
}

// HasRoom is a cheap test that lets a node too full for r be skipped without
// running the Filter plugins; a true answer still needs them.
func (s *Snapshot) HasRoom(name string, r Request) bool {
	ni, ok := s.nodes[name]
	return ok && hasRoom(ni, r)
}

func hasRoom(ni *schedframework.NodeInfo, r Request) bool {
	cpu, mem, pods := free(ni)
	// As the scheduler's resource fit: a resource the pod does not request
	// is not checked, so a pod without requests fits an overcommitted node.
	return pods > 0 && (r.MilliCPU <= 0 || cpu >= r.MilliCPU) && (r.Memory <= 0 || mem >= r.Memory)
}
