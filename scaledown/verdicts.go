package scaledown

import (
	"cmp"
	"context"
	"hash/maphash"
	"slices"
	"unsafe"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// verdicts keeps the outcomes of the removal simulations (tryMove) of the
// last loop, so that a loop in which nothing changed does not simulate the
// same removals again (issue 41, item 2).
//
// A removal's outcome depends on everything the session holds when it is
// simulated: the snapshot's content (what the loop's Reset put in it), the
// removals simulated before it in the same loop (they commit their moves),
// the nodes to avoid, and the pods to move. The key of an outcome is
// therefore a chain: the snapshot's content serial (framework.ContentSerial:
// equal only when every NodeInfo is the one of the loop before), the nodes
// avoided from the start, then each simulation of the loop in order (node,
// pods to move, outcome). A loop that reaches the same chain as the last
// one sees exactly the session the last one saw at that point, and the
// outcome is the same; once a loop's chain differs, it simulates. (That is
// the case "the room around the node is unchanged"; facts.go follows the
// node's own facts, which decide when a node found unremovable is looked at
// again and which nodes the rotation draws first. The rotation keeps its
// plain order whenever it draws every candidate, so that a quiet loop's
// chain is the last one's.)
//
// The drain rules and PDBs run every loop (they read the clock, the
// PodDisruptionBudgets and the workload listers); only the simulation of the
// move is kept. A removal kept as possible is not committed to the session:
// it is deferred, and the deferred removals are simulated, in order, before
// the first removal of the loop that must be simulated, so that it sees the
// session a full simulation would. Deferred removals that no later
// simulation needs are never applied: the session's snapshot after Update
// may lack them (nothing reads it after the planner: with the consolidation
// planner on, scale-down runs in a Fork that is reverted).
type verdicts struct {
	seed maphash.Seed
	snap *framework.Snapshot
	// serial is the content serial prev was recorded under.
	serial    uint64
	prev, cur map[uint64]moveVerdict
	// The loop's state: whether prev may be used (on), whether outcomes are
	// recorded (recording), the chain so far, and the deferred removals.
	on, recording bool
	chain         uint64
	deferred      []deferredMove
	// hits counts the outcomes taken from prev in the loop (tests, logs).
	hits int
	// off disables the cache (tests: the reference planner).
	off bool
}

type moveVerdict struct {
	ok  bool
	why string
}

type deferredMove struct {
	node string
	move []*apiv1.Pod
}

// begin starts a loop: the session's snapshot content and the nodes every
// removal avoids from the start.
func (v *verdicts) begin(in Input, removed map[string]bool) {
	v.on, v.recording, v.deferred, v.hits = false, false, v.deferred[:0], 0
	v.cur = map[uint64]moveVerdict{}
	if v.off || in.reset == nil {
		v.prev = nil
		return
	}
	if v.seed == (maphash.Seed{}) {
		v.seed = maphash.MakeSeed()
	}
	serial, pristine := in.reset.ContentSerial()
	if !pristine {
		v.prev = nil
		return
	}
	v.on = v.prev != nil && v.snap == in.reset && v.serial == serial
	if !v.on {
		v.prev = nil
	}
	v.recording, v.snap, v.serial = true, in.reset, serial
	var h maphash.Hash
	h.SetSeed(v.seed)
	names := make([]string, 0, len(removed))
	for n := range removed {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h.WriteString(n)
		h.WriteByte(0)
	}
	v.chain = h.Sum64()
}

// end closes a loop: its outcomes are the ones the next loop may keep.
func (v *verdicts) end() {
	if v.recording {
		v.prev = v.cur
	}
	v.cur = nil
}

func (v *verdicts) key(node string, move []*apiv1.Pod) uint64 {
	var h maphash.Hash
	h.SetSeed(v.seed)
	var b [8]byte
	put := func(x uint64) {
		for i := range b {
			b[i] = byte(x >> (8 * i))
		}
		h.Write(b[:])
	}
	put(v.chain)
	h.WriteString(node)
	h.WriteByte(0)
	for _, p := range move {
		put(uint64(uintptr(unsafe.Pointer(p))))
	}
	return h.Sum64()
}

func (v *verdicts) extend(k uint64, r moveVerdict) {
	var h maphash.Hash
	h.SetSeed(v.seed)
	var b [9]byte
	for i := range 8 {
		b[i] = byte(k >> (8 * i))
	}
	if r.ok {
		b[8] = 1
	}
	h.Write(b[:])
	h.WriteString(r.why)
	v.chain = h.Sum64()
}

// tryMove is tryMove (devices.go) through the cache: the outcome the last
// loop had for the same chain, or a simulation after the deferred removals.
// removed is the set of nodes to avoid, which the caller grows with each
// node found removable.
func (v *verdicts) tryMove(ctx context.Context, s Session, node string, move []*apiv1.Pod,
	removed map[string]bool) (bool, string) {
	if !v.recording {
		return tryMove(ctx, s, node, move, removed)
	}
	if _, versioned := v.snap.ResetNodeVersion(node); !versioned {
		// Its pods are not held by the snapshot: their addresses may not
		// stand for them in the next loop.
		v.recording, v.on = false, false
		v.flush(ctx, s, removed)
		return tryMove(ctx, s, node, move, removed)
	}
	k := v.key(node, move)
	if r, ok := v.prev[k]; ok && v.on {
		v.hits++
		if r.ok {
			v.deferred = append(v.deferred, deferredMove{node: node, move: move})
		}
		v.cur[k] = r
		v.extend(k, r)
		return r.ok, r.why
	}
	v.on = false // the chain left the last loop's: simulate from here on
	v.flush(ctx, s, removed)
	ok, why := tryMove(ctx, s, node, move, removed)
	r := moveVerdict{ok: ok, why: why}
	v.cur[k] = r
	v.extend(k, r)
	return ok, why
}

// flush simulates the deferred removals in order, each avoiding the nodes
// it avoided when its outcome was taken from the cache.
func (v *verdicts) flush(ctx context.Context, s Session, removed map[string]bool) {
	if len(v.deferred) == 0 {
		return
	}
	for _, d := range v.deferred {
		delete(removed, d.node)
	}
	for _, d := range v.deferred {
		if ok, why := tryMove(ctx, s, d.node, d.move, removed); !ok {
			// The same session as the loop that found it removable: this
			// does not happen unless the simulation is not deterministic.
			klog.FromContext(ctx).Error(nil, "A removal kept from the last loop failed when simulated again",
				"node", d.node, "why", why)
		}
		removed[d.node] = true
	}
	v.deferred = v.deferred[:0]
}

// inNameOrder returns a copy of pods in namespace and name order. The
// simulation of a removal moves a node's pods in this order rather than the
// informers' (which differs from one listing to the next), so that an
// unchanged node is simulated the same way, and its outcome kept, from one
// loop to the next.
func inNameOrder(pods []*apiv1.Pod) []*apiv1.Pod {
	out := slices.Clone(pods)
	slices.SortFunc(out, func(a, b *apiv1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
