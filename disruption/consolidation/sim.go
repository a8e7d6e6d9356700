package consolidation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/template"
)

// errNoRoom: a pod fits none of the open destinations.
var errNoRoom = errors.New("fits no node that stays")

// sim removes nodes in the snapshot and places their pods elsewhere, with
// the scheduler's PreFilter and Filter plugins.
type sim struct {
	h    *framework.Handle
	snap *framework.Snapshot
	memo *framework.CheckMemo
	// dest are the destinations in the order they are asked; next is
	// where the next pod's search starts (where the previous one went),
	// so that the nodes earlier pods filled are not asked again for
	// every pod.
	dest   []string
	isDest map[string]bool
	simState
	reqs  map[*apiv1.Pod]framework.Request
	tries int
}

// simState is what a trial that is reverted must restore besides the
// snapshot.
type simState struct {
	next int
	// closed destinations take no pod: a replacement's new node serves
	// its own candidate only.
	closed map[string]bool
	// moved holds, by node, the (original) pods earlier removals of the
	// plan moved onto it: removing that node moves them again. Slices are
	// never appended to in place, so a copy of the map is a snapshot.
	moved map[string][]*apiv1.Pod
	// room is the cpu and memory left on the open destinations (and a
	// replacement's new node while it is tried), summed: a node whose
	// pods ask more is not simulated.
	room framework.Request
}

func (s simState) clone() simState {
	return simState{next: s.next, closed: maps.Clone(s.closed), moved: maps.Clone(s.moved), room: s.room}
}

func newSim(h *framework.Handle, dest []string) *sim {
	s := &sim{h: h, snap: h.Snapshot(), memo: h.NewCheckMemo(), dest: dest,
		simState: simState{closed: map[string]bool{}, moved: map[string][]*apiv1.Pod{}},
		reqs:     map[*apiv1.Pod]framework.Request{}}
	s.isDest = make(map[string]bool, len(dest))
	for _, d := range dest {
		s.isDest[d] = true
	}
	s.measureRoom()
	return s
}

// tryRemove removes ns's node and moves its pods (and those earlier
// removals moved onto it) to the open destinations, or, last, to extra (a
// replacement's new node; "" for none). When every pod fits, the removal
// stays in the snapshot and true is returned; otherwise nothing changes.
func (s *sim) tryRemove(ctx context.Context, ns *nodeState, extra string) bool {
	name := ns.node.Name
	pods := slices.Concat(ns.move, s.moved[name])
	var own framework.Request
	if s.isDest[name] && !s.closed[name] {
		own = s.free(name) // counted in s.room
	}
	var need framework.Request
	for _, p := range pods {
		r := s.request(p)
		need.MilliCPU += r.MilliCPU
		need.Memory += r.Memory
	}
	if need.MilliCPU > s.room.MilliCPU-own.MilliCPU || need.Memory > s.room.Memory-own.Memory {
		return false
	}
	s.tries++
	s.snap.Fork()
	if err := s.snap.RemoveNode(name); err != nil {
		s.snap.Revert()
		return false
	}
	next := s.next
	placed := map[string][]*apiv1.Pod{}
	for _, p := range pods {
		dest, err := s.place(ctx, p, extra)
		if err != nil {
			s.snap.Revert()
			s.next = next
			return false
		}
		placed[dest] = append(placed[dest], p)
	}
	s.snap.Commit()
	s.room.MilliCPU -= own.MilliCPU + need.MilliCPU
	s.room.Memory -= own.Memory + need.Memory
	delete(s.moved, name)
	for d, ps := range placed {
		s.moved[d] = slices.Concat(s.moved[d], ps)
	}
	return true
}

// place binds a copy of pod to the first open destination that takes it,
// from s.next on, or else to extra.
func (s *sim) place(ctx context.Context, pod *apiv1.Pod, extra string) (string, error) {
	cp := *pod // shallow: the simulation never changes a pod
	cp.Spec.NodeName = ""
	check := s.memo.Prepare(ctx, &cp)
	if err := check.Err(); err != nil {
		return "", err
	}
	r := s.request(pod)
	dest := ""
	for k, n := 0, len(s.dest); k < n && dest == ""; k++ {
		i := (s.next + k) % n
		name := s.dest[i]
		if !s.closed[name] && s.snap.HasRoom(name, r) && check.Fits(ctx, name) == nil {
			dest, s.next = name, i
		}
	}
	if dest == "" && extra != "" && s.snap.HasRoom(extra, r) && check.Fits(ctx, extra) == nil {
		dest = extra
	}
	if dest == "" {
		return "", errNoRoom
	}
	cp.Spec.NodeName = dest
	if err := s.snap.AddPodLike(&cp, pod, dest); err != nil {
		return "", err
	}
	return dest, nil
}

// free is what node has left (none when overcommitted or gone).
func (s *sim) free(node string) framework.Request {
	cpu, mem, _, err := s.snap.Free(node)
	if err != nil {
		return framework.Request{}
	}
	return framework.Request{MilliCPU: max(cpu, 0), Memory: max(mem, 0)}
}

// open adds node's free room to s.room (a destination or a new node).
func (s *sim) open(node string) {
	f := s.free(node)
	s.room.MilliCPU += f.MilliCPU
	s.room.Memory += f.Memory
}

// close makes node take no more pods.
func (s *sim) close(node string) {
	if !s.closed[node] {
		f := s.free(node)
		s.room.MilliCPU -= f.MilliCPU
		s.room.Memory -= f.Memory
		s.closed[node] = true
	}
}

// measureRoom sums the room of the open destinations.
func (s *sim) measureRoom() {
	s.room = framework.Request{}
	for _, d := range s.dest {
		if !s.closed[d] {
			s.open(d)
		}
	}
}

// request is pod's cpu and memory request, computed once per plan.
func (s *sim) request(pod *apiv1.Pod) framework.Request {
	r, ok := s.reqs[pod]
	if !ok {
		r = framework.RequestOf(pod)
		s.reqs[pod] = r
	}
	return r
}

// addTemplate adds a new node of group id made from info to the snapshot,
// with its DaemonSet pods, CSINode and ResourceSlices; i numbers it.
func (s *sim) addTemplate(id string, info *cloudprovider.NodeInfo, i int) (string, error) {
	node, pods := template.Clone(info, "consolidation-"+id, i)
	if err := s.snap.AddNode(node, pods...); err != nil {
		return "", fmt.Errorf("adding a template node of group %s: %w", id, err)
	}
	if c, ok := s.snap.CSINode(info.Node.Name); ok && c != nil {
		s.snap.SetCSINode(node.Name, framework.RenamedCSINode(c, node.Name))
	}
	if len(info.ResourceSlices) > 0 {
		s.snap.SetResourceSlices(node.Name, framework.RenamedResourceSlices(info.ResourceSlices, info.Node.Name, node.Name))
	}
	return node.Name, nil
}
