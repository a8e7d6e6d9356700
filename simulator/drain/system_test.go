package drain

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"

	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

func TestSystemPodRule(t *testing.T) {
	young := t0.Add(-59 * time.Minute)
	dnsPDB := pdb("kube-system", "dns", "dns", 0) // covers even with no budget left
	badPDB := pdb("kube-system", "bad", "", 1)
	badPDB.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}
	sysPod := func() *testbuild.PodBuilder {
		return makePod("dns-1").Namespace("kube-system").ReplicaSet("dns").Label("app", "dns")
	}
	tests := []struct {
		name       string
		pod        *apiv1.Pod
		timeout    time.Duration
		pdbs       []*policyv1.PodDisruptionBudget // budget passed to Classify
		nilBudget  bool                            // no budget: read pdbLister
		lister     policylisters.PodDisruptionBudgetLister
		want       verdict
		wantReason BlockingReason
	}{
		{name: "other namespace", pod: makePod("p").Created(young).Obj(), timeout: time.Hour, want: undecided},
		{name: "young, no PDB", pod: sysPod().Created(young).Obj(), timeout: time.Hour, want: block, wantReason: UnmovableKubeSystemPod},
		{name: "exactly the timeout old", pod: sysPod().Created(t0.Add(-time.Hour)).Obj(), timeout: time.Hour, want: undecided},
		{name: "older than the timeout", pod: sysPod().Created(t0.Add(-2 * time.Hour)).Obj(), timeout: time.Hour, want: undecided},
		{name: "no creation timestamp is new", pod: sysPod().Created(time.Time{}).Obj(), timeout: time.Hour, want: block, wantReason: UnmovableKubeSystemPod},
		{name: "timeout zero waives at once", pod: sysPod().Created(t0).Obj(), timeout: 0, want: undecided},
		{name: "covered by a PDB with no budget left", pod: sysPod().Created(young).Obj(), timeout: time.Hour,
			pdbs: []*policyv1.PodDisruptionBudget{dnsPDB}, want: undecided},
		{name: "PDB selects other pods", pod: sysPod().Created(young).Obj(), timeout: time.Hour,
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kube-system", "x", "other", 1)}, want: block, wantReason: UnmovableKubeSystemPod},
		{name: "matching PDB in another namespace", pod: sysPod().Created(young).Obj(), timeout: time.Hour,
			pdbs: []*policyv1.PodDisruptionBudget{pdb("default", "dns", "dns", 1)}, want: block, wantReason: UnmovableKubeSystemPod},
		{name: "invalid PDB selector", pod: sysPod().Created(young).Obj(), timeout: time.Hour,
			pdbs: []*policyv1.PodDisruptionBudget{badPDB}, want: block, wantReason: UnexpectedError},
		{name: "no budget: lister covers", pod: sysPod().Created(young).Obj(), timeout: time.Hour, nilBudget: true,
			lister: makeListers(t, dnsPDB).PodDisruptionBudgets, want: undecided},
		{name: "no budget: lister does not cover", pod: sysPod().Created(young).Obj(), timeout: time.Hour, nilBudget: true,
			lister: makeListers(t, pdb("kube-system", "x", "other", 1)).PodDisruptionBudgets, want: block, wantReason: UnmovableKubeSystemPod},
		{name: "no budget, no lister", pod: sysPod().Created(young).Obj(), timeout: time.Hour, nilBudget: true,
			want: block, wantReason: UnmovableKubeSystemPod},
		{name: "no budget: lister fails", pod: sysPod().Created(young).Obj(), timeout: time.Hour, nilBudget: true,
			lister: brokenPDBLister{}, want: block, wantReason: UnexpectedError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := &classifyEnv{now: t0}
			if !tc.nilBudget {
				env.pdbs = PDBsFromList(tc.pdbs)
			}
			r := systemPodRule{timeout: tc.timeout, pdbLister: tc.lister}
			checkOutcome(t, r.check(tc.pod, env), tc.want, tc.wantReason)
		})
	}
}
