package drain

import (
	"fmt"
	"sort"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	policylisters "k8s.io/client-go/listers/policy/v1"
)

// PDBs is the remaining disruption budget of the cluster for one decision:
// it starts from each PodDisruptionBudget's status.disruptionsAllowed, and
// every successful Classify against it subtracts the evictions it counted, so
// two nodes do not spend the same budget. Fork gives an independent copy to
// try a node against. A PDBs is not safe for concurrent use.
type PDBs struct {
	// entries and byNamespace are shared by forks and never written after
	// construction; remaining is each fork's own.
	entries     []pdbEntry
	byNamespace map[string][]int
	remaining   []int32
}

type pdbEntry struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
	err      error // the selector is invalid
}

// budgetSpend counts, per entry index, the disruptions one Classify call uses.
type budgetSpend map[int]int32

// NewPDBs reads the PDBs once from the lister; a nil lister gives an empty
// budget.
func (r *Rules) NewPDBs() (*PDBs, error) {
	if r.listers.PodDisruptionBudgets == nil {
		return PDBsFromList(nil), nil
	}
	list, err := r.listers.PodDisruptionBudgets.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pod disruption budgets: %w", err)
	}
	return PDBsFromList(list), nil
}

// PDBsFromList builds the budget from PDBs the caller already holds (for
// example an observation's). The objects are read, never modified.
func PDBsFromList(pdbs []*policyv1.PodDisruptionBudget) *PDBs {
	sorted := make([]*policyv1.PodDisruptionBudget, 0, len(pdbs))
	for _, p := range pdbs {
		if p != nil {
			sorted = append(sorted, p)
		}
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
	})
	b := &PDBs{
		entries:     make([]pdbEntry, len(sorted)),
		byNamespace: map[string][]int{},
		remaining:   make([]int32, len(sorted)),
	}
	for i, p := range sorted {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		b.entries[i] = pdbEntry{pdb: p, selector: sel, err: err}
		b.byNamespace[p.Namespace] = append(b.byNamespace[p.Namespace], i)
		b.remaining[i] = p.Status.DisruptionsAllowed
	}
	return b
}

// Fork returns a copy whose spending does not affect b (nor b's, the copy).
// Keep the fork to accept what was classified against it, drop it to undo.
func (b *PDBs) Fork() *PDBs {
	if b == nil {
		return nil
	}
	f := *b
	f.remaining = append([]int32(nil), b.remaining...)
	return &f
}

// List returns the PodDisruptionBudgets the budget was built from, in
// namespace and name order (the scale-down planner tells which changed
// from one loop to the next). The objects must not be modified.
func (b *PDBs) List() []*policyv1.PodDisruptionBudget {
	if b == nil {
		return nil
	}
	out := make([]*policyv1.PodDisruptionBudget, len(b.entries))
	for i := range b.entries {
		out[i] = b.entries[i].pdb
	}
	return out
}

// Remaining returns the disruptions PDB namespace/name still allows in this
// budget, and whether the budget knows that PDB.
func (b *PDBs) Remaining(namespace, name string) (int32, bool) {
	if b == nil {
		return 0, false
	}
	for _, i := range b.byNamespace[namespace] {
		if b.entries[i].pdb.Name == name {
			return b.remaining[i], true
		}
	}
	return 0, false
}

// matching returns the indexes of the PDBs selecting pod: same namespace and
// a matching label selector (an empty selector selects every pod of the
// namespace, a nil one none). A PDB of the namespace with an invalid selector
// makes it an error: we cannot tell whether it protects the pod.
func (b *PDBs) matching(pod *apiv1.Pod) ([]int, error) {
	var out []int
	set := labels.Set(pod.Labels)
	for _, i := range b.byNamespace[pod.Namespace] {
		e := &b.entries[i]
		if e.err != nil {
			return nil, fmt.Errorf("selector of PodDisruptionBudget %s/%s: %w", e.pdb.Namespace, e.pdb.Name, e.err)
		}
		if e.selector.Matches(set) {
			out = append(out, i)
		}
	}
	return out, nil
}

// reserve is the PDB rule for one pod to be moved: it blocks (NotEnoughPdb)
// when a PDB selecting pod has no disruption left once spend is counted, and
// otherwise adds the pod's disruption of each such PDB to spend.
func (b *PDBs) reserve(pod *apiv1.Pod, spend budgetSpend) outcome {
	idx, err := b.matching(pod)
	if err != nil {
		return blocked(UnexpectedError, "matching pod %s/%s to pod disruption budgets: %v", pod.Namespace, pod.Name, err)
	}
	for _, i := range idx {
		if b.remaining[i]-spend[i] < 1 {
			p := b.entries[i].pdb
			return blocked(NotEnoughPdb, "PodDisruptionBudget %s/%s allows no more disruption to move pod %s",
				p.Namespace, p.Name, pod.Name)
		}
	}
	for _, i := range idx {
		spend[i]++
	}
	return outcome{verdict: move}
}

// commit subtracts a successful Classify call's spend from the budget.
func (b *PDBs) commit(spend budgetSpend) {
	for i, n := range spend {
		b.remaining[i] -= n
	}
}

// listerCovers reports whether some PDB of pod's namespace in the lister
// selects pod, whatever its budget.
func listerCovers(l policylisters.PodDisruptionBudgetLister, pod *apiv1.Pod) (bool, error) {
	list, err := l.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return false, fmt.Errorf("listing pod disruption budgets of %s: %w", pod.Namespace, err)
	}
	idx, err := PDBsFromList(list).matching(pod)
	return len(idx) > 0, err
}
