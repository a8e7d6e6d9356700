package scaledown

import (
	"hash/maphash"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// facts keeps, per eligible node, whether what a removal simulation reads
// of the node itself changed since its last simulation (issue 41, item 2):
// its Node object, its pods and the PodDisruptionBudgets covering them. The
// room on the other nodes is not part of it (verdicts.go keeps outcomes
// while the whole snapshot is unchanged). The planner uses it two ways:
//   - a node kept RecentlyUnremovable (--unremovable-node-recheck-timeout)
//     whose facts changed is simulated again at once: the pod that blocked
//     it may be gone, a PDB may allow a disruption now;
//   - when the rotation cannot draw every candidate in one loop, the nodes
//     whose facts changed, that were never simulated, or whose last
//     simulation is staleAfter old come first (candidates.go).
//
// "Changed" errs on the side of yes (a pod's status update counts): a node
// taken as changed is only simulated, as it would have been without this.
// A node taken as unchanged keeps what it had before this existed (its
// recheck entry, its place in the rotation), so nothing is decided on a
// fact this does not see (the clock, the workload listers, the room
// elsewhere).
type facts struct {
	seed   maphash.Seed
	byNode map[string]*nodeFacts
	// pdbs are the last loop's PodDisruptionBudgets by UID, to tell which
	// changed since (added, updated or deleted).
	pdbs map[types.UID]*policyv1.PodDisruptionBudget
	loop uint64
	// off disables it (tests: the planner as it was without it).
	off bool
}

// fingerprint stands for a node's Node object and pods: the snapshot's
// version of the node when the loop's Reset holds it (pointer identity of
// informer objects, framework.NodeVersion), else a hash of the Node's and
// the pods' UIDs and resourceVersions.
type fingerprint struct {
	version   framework.NodeVersion
	versioned bool
	print     uint64
}

type nodeFacts struct {
	// cur is this loop's fingerprint, last the one of the last simulation
	// (dropped once changed is set, so that no old NodeInfo is held).
	cur, last fingerprint
	// at is when the node was last simulated; simulated is false until then.
	at        time.Time
	simulated bool
	// changed says what changed since the last simulation ("" nothing).
	changed string
	loop    uint64
}

// observe starts a loop: it reads each eligible node's fingerprint, marks
// the nodes simulated before whose fingerprint differs or whose pods a
// PodDisruptionBudget changed since the last loop covers, and forgets the
// nodes not eligible in this loop (gone, or no longer candidates: they come
// back as never simulated).
func (f *facts) observe(eligible []*Candidate, podsOf map[*Candidate][]*apiv1.Pod, in Input,
	pdbs []*policyv1.PodDisruptionBudget) {
	if f.off {
		return
	}
	if f.seed == (maphash.Seed{}) {
		f.seed = maphash.MakeSeed()
	}
	if f.byNode == nil {
		f.byNode = map[string]*nodeFacts{}
	}
	f.loop++
	changedPDBs := f.pdbChanges(pdbs)
	for _, c := range eligible {
		name := c.Node.Name
		cur := f.fingerprintOf(c.Node, podsOf[c], in)
		nf := f.byNode[name]
		if nf == nil {
			nf = &nodeFacts{}
			f.byNode[name] = nf
		}
		nf.cur, nf.loop = cur, f.loop
		if !nf.simulated || nf.changed != "" {
			continue
		}
		switch {
		case cur != nf.last:
			nf.changed = "its Node object or pods changed"
		case coveredByAny(podsOf[c], changedPDBs):
			nf.changed = "a PodDisruptionBudget covering its pods changed"
		}
		if nf.changed != "" {
			nf.last = fingerprint{}
		}
	}
	for name, nf := range f.byNode {
		if nf.loop != f.loop {
			delete(f.byNode, name)
		}
	}
}

// simulated records that node was simulated at now, with this loop's
// fingerprint.
func (f *facts) simulated(node string, now time.Time) {
	if nf := f.byNode[node]; nf != nil {
		nf.last, nf.at, nf.simulated, nf.changed = nf.cur, now, true, ""
	}
}

// changedSince says what changed of node since its last simulation; "" when
// nothing did, or when it is not known (never simulated, or not followed).
func (f *facts) changedSince(node string) string {
	if nf := f.byNode[node]; nf != nil && nf.simulated {
		return nf.changed
	}
	return ""
}

// changedFirst returns cs with the nodes to look at first ahead: those
// whose facts changed since their last simulation, never simulated, or
// last simulated staleAfter ago or more (so that under churn no node waits
// for ever); each part keeps its order in cs.
func (f *facts) changedFirst(cs []*Candidate, now time.Time, staleAfter time.Duration) []*Candidate {
	if f.off {
		return cs
	}
	first := make([]*Candidate, 0, len(cs))
	var after []*Candidate
	for _, c := range cs {
		nf := f.byNode[c.Node.Name]
		if nf != nil && nf.simulated && nf.changed == "" && now.Sub(nf.at) < staleAfter {
			after = append(after, c)
			continue
		}
		first = append(first, c)
	}
	return append(first, after...)
}

func (f *facts) fingerprintOf(n *apiv1.Node, pods []*apiv1.Pod, in Input) fingerprint {
	if in.reset != nil {
		if v, ok := in.reset.ResetNodeVersion(n.Name); ok {
			return fingerprint{version: v, versioned: true}
		}
	}
	var h maphash.Hash
	h.SetSeed(f.seed)
	write := func(uid types.UID, rv string) {
		h.WriteString(string(uid))
		h.WriteByte(0)
		h.WriteString(rv)
		h.WriteByte(0)
	}
	write(n.UID, n.ResourceVersion)
	for _, p := range pods {
		write(p.UID, p.ResourceVersion)
	}
	return fingerprint{print: h.Sum64()}
}

// pdbChanges returns, by namespace, the selectors of the
// PodDisruptionBudgets added, updated (old and new selector) or deleted
// since the last loop, and remembers list for the next. An invalid
// selector selects every pod of its namespace (the drain rule blocks them
// all).
func (f *facts) pdbChanges(list []*policyv1.PodDisruptionBudget) map[string][]labels.Selector {
	var out map[string][]labels.Selector
	add := func(p *policyv1.PodDisruptionBudget) {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			sel = labels.Everything()
		}
		if out == nil {
			out = map[string][]labels.Selector{}
		}
		out[p.Namespace] = append(out[p.Namespace], sel)
	}
	cur := make(map[types.UID]*policyv1.PodDisruptionBudget, len(list))
	for _, p := range list {
		cur[p.UID] = p
		old, ok := f.pdbs[p.UID]
		if ok && old.ResourceVersion == p.ResourceVersion {
			continue
		}
		add(p)
		if ok {
			add(old)
		}
	}
	for uid, old := range f.pdbs {
		if _, ok := cur[uid]; !ok {
			add(old)
		}
	}
	f.pdbs = cur
	return out
}

func coveredByAny(pods []*apiv1.Pod, selectors map[string][]labels.Selector) bool {
	if len(selectors) == 0 {
		return false
	}
	for _, p := range pods {
		for _, sel := range selectors[p.Namespace] {
			if sel.Matches(labels.Set(p.Labels)) {
				return true
			}
		}
	}
	return false
}
