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
// last loop, so that a loop does not simulate again the removals whose room
// did not change (issue 41, item 2).
//
// A removal's outcome depends on everything the session holds when it is
// simulated: the snapshot's content (what the loop's Reset put in it), the
// removals simulated before it in the same loop (they commit their moves
// and move the session's cursor, framework.Handle.FitFrom), the nodes to
// avoid, and the pods to move. Outcomes are therefore kept along a chain:
// the nodes avoided from the start, then each simulation of the loop in
// order (its node and outcome). A simulation at the same place of the
// chain as in the last loop, moving the same pod objects, keeps its
// outcome when:
//   - the snapshot's content is the last loop's (framework.ContentSerial:
//     every NodeInfo kept); or
//   - something changed elsewhere: the nodes are the same names in the same
//     order (framework.ResetLayout: the cursor counts in that list), no pod
//     in either loop has a required anti-affinity term (it could refuse a
//     pod on nodes other than its own), no pod the simulation placed has
//     required inter-pod terms or a hard topology spread constraint of its
//     own or of the scheduler profile, and the profile enables no plugin
//     that may read other nodes (framework.Handle.ReadsOtherNodes, told by
//     framework.Walk.Wide), and every node the simulation read (its walk: the
//     nodes whose Filter plugins ran, recorded by a WalkingSession; at most
//     maxWalk, so a pod that fits nowhere, which reads them all, is kept
//     only while nothing changed) is unchanged since (framework
//     .UnchangedSince) and was not filled differently earlier in this loop
//     (dirty). The plugins then read nothing but the pod and each walked
//     node, and those hold what they held in the last loop.
//
// A simulation that cannot be kept is run; when it ends as the last loop's
// did at the same place (the same outcome, its pods on the same nodes in
// the same order: the session's cursor and filled nodes are the same), the
// chain goes on, with the nodes it filled marked dirty if it moved other
// pod objects (a pod replaced). Otherwise every later simulation of the
// loop is run. (facts.go follows each node's own facts, which decide when a
// node found unremovable is looked at again and which nodes the rotation
// draws first. The rotation keeps its plain order whenever it draws every
// candidate, so that a quiet loop's chain is the last one's.)
//
// The drain rules and PDBs run every loop (they read the clock, the
// PodDisruptionBudgets and the workload listers); only the simulation of the
// move is kept. A kept outcome is not applied to the session at once: it is
// deferred, and the deferred ones are applied in order before the first
// simulation of the loop that must run, so that it sees the session a full
// simulation would: replayed from their recorded destinations without the
// plugins (ReplayingSession: a removal that went is committed, one refused
// part way moves the cursor as it did), or else simulated again. Deferred
// outcomes that no later simulation needs are never applied: the session's
// snapshot after Update may lack them (nothing reads it after the planner:
// with the consolidation planner on, scale-down runs in a Fork that is
// reverted).
type verdicts struct {
	seed maphash.Seed
	snap *framework.Snapshot
	// serial is the content serial prev was recorded under; layout, reset
	// and antiAffinity the snapshot's layout, Reset number and whether a
	// pod had a required anti-affinity term then.
	serial       uint64
	layout       uint64
	reset        uint64
	antiAffinity bool
	// exact: the snapshot is the one prev was recorded on (every outcome
	// holds); else, when local, outcomes hold whose walk is unchanged.
	exact, local bool
	prev, cur    map[uint64]moveVerdict
	// The loop's state: whether prev may be used (on), whether outcomes are
	// recorded (recording), the chain so far, and the deferred removals.
	on, recording bool
	chain         uint64
	deferred      []deferredMove
	// dirty names the nodes this loop filled with other pod objects than the
	// last loop did at the same place of the chain (tryMove).
	dirty map[string]bool
	// hits counts the outcomes taken from prev in the loop (tests, logs),
	// localHits those of them taken while something changed elsewhere.
	hits, localHits int
	// prevReset is the Reset number prev was recorded at.
	prevReset uint64
	// off disables the cache (tests: the reference planner).
	off bool
}

type moveVerdict struct {
	ok  bool
	why string
	// pods is the podsKey of the pods moved.
	pods uint64
	// walk: the nodes the simulation read; wide when they are more than
	// maxWalk, unknown, or when a moved pod's plugins read other nodes.
	walk []string
	wide bool
	// dests: where the moved pods went, in order (known: recorded).
	dests []string
	known bool
}

// maxWalk bounds the nodes recorded per simulation.
const maxWalk = 64

// deferredMove is a kept outcome not yet applied to the session: a removal
// found possible (committed when applied) or not (its simulation moved the
// session's cursor all the same).
type deferredMove struct {
	node string
	move []*apiv1.Pod
	rec  moveVerdict
}

// begin starts a loop: the session's snapshot content and the nodes every
// removal avoids from the start.
func (v *verdicts) begin(in Input, removed map[string]bool) {
	v.on, v.recording, v.deferred, v.hits, v.localHits = false, false, v.deferred[:0], 0, 0
	v.exact, v.local = false, false
	v.cur = map[uint64]moveVerdict{}
	clear(v.dirty)
	if v.dirty == nil {
		v.dirty = map[string]bool{}
	}
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
	layout, anti := in.reset.ResetLayout(), in.reset.HasRequiredAntiAffinity()
	same := v.prev != nil && v.snap == in.reset
	v.exact = same && v.serial == serial
	v.local = same && !v.exact && v.layout == layout && !v.antiAffinity && !anti
	v.on = v.exact || v.local
	if !v.on {
		v.prev = nil
	}
	v.prevReset = v.reset
	v.recording, v.snap, v.serial, v.layout, v.antiAffinity = true, in.reset, serial, layout, anti
	v.reset = in.reset.ResetCount()
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
	// A loop that stopped recording (a node the snapshot does not hold)
	// leaves nothing to keep: the stamps begin wrote are this loop's.
	v.prev = nil
	if v.recording {
		v.prev = v.cur
	}
	v.cur = nil
}

// pos is the place of a simulation of node in the loop's chain; podsKey
// stands for the pods it moves (their objects, in order).
func (v *verdicts) pos(node string) uint64 {
	var h maphash.Hash
	h.SetSeed(v.seed)
	writeUint64(&h, v.chain)
	h.WriteString(node)
	return h.Sum64()
}

func (v *verdicts) podsKey(move []*apiv1.Pod) uint64 {
	var h maphash.Hash
	h.SetSeed(v.seed)
	for _, p := range move {
		writeUint64(&h, uint64(uintptr(unsafe.Pointer(p))))
	}
	writeUint64(&h, uint64(len(move)))
	return h.Sum64()
}

func writeUint64(h *maphash.Hash, x uint64) {
	var b [8]byte
	for i := range b {
		b[i] = byte(x >> (8 * i))
	}
	h.Write(b[:])
}

// extend adds a simulation's place and outcome to the chain. The pods moved
// are not part of it: a simulation that moved other pod objects to the same
// nodes with the same outcome left the session as the last loop's, but for
// the content of those nodes (dirty).
func (v *verdicts) extend(pos uint64, r moveVerdict) {
	var h maphash.Hash
	h.SetSeed(v.seed)
	writeUint64(&h, pos)
	if r.ok {
		h.WriteByte(1)
	} else {
		h.WriteByte(0)
	}
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
	pos, pods := v.pos(node), v.podsKey(move)
	rec, found := v.prev[pos]
	if found && v.on && rec.pods == pods && v.holds(rec) {
		v.hits++
		if !v.exact {
			v.localHits++
		}
		v.deferred = append(v.deferred, deferredMove{node: node, move: move, rec: rec})
		v.cur[pos] = rec
		v.extend(pos, rec)
		return rec.ok, rec.why
	}
	v.flush(ctx, s, removed)
	r := tryMoveWalk(ctx, s, node, move, removed)
	r.pods = pods
	if v.on && !(found && rec.converges(r)) {
		v.on = false // the chain left the last loop's: simulate from here on
	}
	if v.on && rec.pods != pods {
		// Other pod objects went where the last loop's went: those nodes'
		// content is no longer what the kept outcomes read.
		for _, d := range r.dests {
			v.dirty[d] = true
		}
	}
	v.cur[pos] = r
	v.extend(pos, r)
	return r.ok, r.why
}

// converges reports whether simulation r, made anew where the last loop made
// rec, left the session as rec did: the same outcome, with the moved pods
// (as many) placed on the same nodes in the same order, so that the cursor
// and the nodes filled are the same.
func (rec moveVerdict) converges(r moveVerdict) bool {
	return rec.known && r.known && rec.ok == r.ok && rec.why == r.why && slices.Equal(rec.dests, r.dests)
}

// holds reports whether a kept outcome r holds in this loop: always when
// the snapshot is unchanged, else when its walk is known and every node of
// it is unchanged since the loop r was recorded in, and not filled
// differently in this loop (dirty).
func (v *verdicts) holds(r moveVerdict) bool {
	if v.exact && len(v.dirty) == 0 {
		return true
	}
	if !v.local && !v.exact || r.wide {
		return false
	}
	for _, n := range r.walk {
		if v.dirty[n] || !v.snap.UnchangedSince(n, v.prevReset) {
			return false
		}
	}
	return true
}

// tryMoveWalk is tryMove that records the simulation's walk and where the
// pods went when the session tells them (WalkingSession). The walk is
// usable only when every placed pod's plugins read just the nodes they are
// asked about (framework.Walk.Wide).
func tryMoveWalk(ctx context.Context, s Session, node string, move []*apiv1.Pod, avoid map[string]bool) moveVerdict {
	ws, walks := s.(WalkingSession)
	if !walks {
		ok, why := tryMove(ctx, s, node, move, avoid)
		return moveVerdict{ok: ok, why: why, wide: true}
	}
	var w framework.Walk
	r := moveVerdict{ok: true, known: true}
	if err := ws.TryRemoveWalk(ctx, node, move, avoid, &w); err != nil {
		r.ok = false
		if _, explains := s.(ExplainingSession); explains {
			r.why = err.Error()
		}
	}
	r.dests = slices.Clip(w.Dest)
	read := slices.Compact(slices.Sorted(slices.Values(w.Read)))
	if len(read) > maxWalk || w.Wide {
		r.wide = true
	} else {
		r.walk = slices.Clip(read)
	}
	return r
}

// flush applies the deferred outcomes to the session in order, so that the
// next simulation sees the session a full simulation would: each replayed
// from its recorded destinations (ReplayingSession), or else simulated
// again avoiding the nodes it avoided when it was kept.
func (v *verdicts) flush(ctx context.Context, s Session, removed map[string]bool) {
	if len(v.deferred) == 0 {
		return
	}
	for _, d := range v.deferred {
		if d.rec.ok {
			delete(removed, d.node)
		}
	}
	rs, replays := s.(ReplayingSession)
	for _, d := range v.deferred {
		if replays && d.rec.known {
			err := rs.ReplayRemoval(ctx, d.node, d.move, d.rec.dests, d.rec.ok)
			if err == nil {
				if d.rec.ok {
					removed[d.node] = true
				}
				continue
			}
			klog.FromContext(ctx).Error(err, "A kept removal outcome could not be replayed; simulating it", "node", d.node)
		}
		ok, why := tryMove(ctx, s, d.node, d.move, removed)
		if ok != d.rec.ok {
			// The same session as the loop that found it: this does not
			// happen unless the simulation is not deterministic.
			klog.FromContext(ctx).Error(nil, "A removal outcome kept from the last loop differed when simulated again",
				"node", d.node, "kept", d.rec.ok, "why", why)
		}
		if ok {
			removed[d.node] = true
		}
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
