package drain

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// remainingOf snapshots every PDB's remaining budget by namespace/name.
func remainingOf(b *PDBs) map[string]int32 {
	out := map[string]int32{}
	for i, e := range b.entries {
		out[e.pdb.Namespace+"/"+e.pdb.Name] = b.remaining[i]
	}
	return out
}

func indexOf(t *testing.T, b *PDBs, ns, name string) int {
	t.Helper()
	for i, e := range b.entries {
		if e.pdb.Namespace == ns && e.pdb.Name == name {
			return i
		}
	}
	t.Fatalf("no PDB %s/%s", ns, name)
	return -1
}

func TestPDBsMatching(t *testing.T) {
	nilSel := pdb("default", "nil-selector", "", 1)
	nilSel.Spec.Selector = nil
	b := PDBsFromList([]*policyv1.PodDisruptionBudget{
		pdb("default", "web", "web", 1),
		pdb("default", "all", "", 1),
		nilSel,
		pdb("other", "web", "web", 1),
		nil,
	})
	tests := []struct {
		name string
		pod  *apiv1.Pod
		want []string
	}{
		{"label and empty selector", makePod("p").Label("app", "web").Obj(), []string{"default/all", "default/web"}},
		{"empty selector only", makePod("p").Label("app", "db").Obj(), []string{"default/all"}},
		{"other namespace", makePod("p").Namespace("other").Label("app", "web").Obj(), []string{"other/web"}},
		{"namespace without PDBs", makePod("p").Namespace("empty").Label("app", "web").Obj(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx, err := b.matching(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range idx {
				got = append(got, b.entries[i].pdb.Namespace+"/"+b.entries[i].pdb.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("matching PDBs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPDBsReserveCommitFork(t *testing.T) {
	b := PDBsFromList([]*policyv1.PodDisruptionBudget{pdb("default", "web", "web", 2), pdb("default", "none", "db", 0)})
	web := func(name string) *apiv1.Pod { return makePod(name).Label("app", "web").Obj() }

	spend := budgetSpend{}
	checkOutcome(t, b.reserve(web("a"), spend), move, "")
	checkOutcome(t, b.reserve(web("b"), spend), move, "")
	checkOutcome(t, b.reserve(web("c"), spend), block, NotEnoughPdb)
	checkOutcome(t, b.reserve(makePod("d").Label("app", "db").Obj(), spend), block, NotEnoughPdb)
	checkOutcome(t, b.reserve(makePod("e").Obj(), spend), move, "")
	if got, _ := b.Remaining("default", "web"); got != 2 {
		t.Errorf("reserve must not spend before commit: remaining %d", got)
	}

	f := b.Fork()
	f.commit(budgetSpend{indexOf(t, f, "default", "web"): 1})
	if diff := cmp.Diff(map[string]int32{"default/none": 0, "default/web": 2}, remainingOf(b)); diff != "" {
		t.Errorf("fork's commit reached the parent (-want +got):\n%s", diff)
	}
	if got, ok := f.Remaining("default", "web"); !ok || got != 1 {
		t.Errorf("fork remaining = %d, %v; want 1, true", got, ok)
	}
	if _, ok := f.Remaining("default", "missing"); ok {
		t.Error("Remaining of an unknown PDB reported known")
	}
	var nilBudget *PDBs
	if nilBudget.Fork() != nil {
		t.Error("Fork of nil must be nil")
	}
}

func TestPDBsInvalidSelector(t *testing.T) {
	bad := pdb("default", "bad", "", 1)
	bad.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}
	b := PDBsFromList([]*policyv1.PodDisruptionBudget{bad})
	checkOutcome(t, b.reserve(makePod("p").Obj(), budgetSpend{}), block, UnexpectedError)
	checkOutcome(t, b.reserve(makePod("p").Namespace("other").Obj(), budgetSpend{}), move, "")
}

func TestNewPDBs(t *testing.T) {
	tests := []struct {
		name    string
		listers Listers
		want    map[string]int32
		wantErr bool
	}{
		{name: "nil lister: empty budget", listers: Listers{}, want: map[string]int32{}},
		{name: "reads status.disruptionsAllowed",
			listers: makeListers(t, pdb("default", "web", "web", 3), pdb("kube-system", "dns", "dns", 0)),
			want:    map[string]int32{"default/web": 3, "kube-system/dns": 0}},
		{name: "lister error", listers: Listers{PodDisruptionBudgets: brokenPDBLister{}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewRules(defaultOptions(), tc.listers).NewPDBs()
			if tc.wantErr {
				if !errors.Is(err, errBroken) {
					t.Fatalf("err = %v, want wrapping %v", err, errBroken)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, remainingOf(b)); diff != "" {
				t.Errorf("remaining (-want +got):\n%s", diff)
			}
		})
	}
}
