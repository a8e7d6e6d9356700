package client_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

func TestAPIServerValidatesStatus(t *testing.T) {
	env, c := setup(t)
	ctx := env.Context()
	prs := c.ProvisioningRequests(env.Namespace)
	created, err := prs.Create(ctx, validRequest(env.Namespace, "status"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	good := metav1.Condition{Type: provreq.ConditionAccepted, Status: metav1.ConditionTrue, Reason: provreq.ReasonAccepted, LastTransitionTime: now}
	details := func(n, size int) map[string]v1.Detail {
		m := map[string]v1.Detail{}
		for i := range n {
			m["d"+strings.Repeat("d", i)] = v1.Detail(strings.Repeat("x", size))
		}
		return m
	}
	tests := []struct {
		name    string
		status  v1.ProvisioningRequestStatus
		invalid bool // refused by validation
		refused bool // refused some other way
	}{
		{name: "at the limits", status: v1.ProvisioningRequestStatus{Conditions: []metav1.Condition{good}, ProvisioningClassDetails: details(64, 100)}},
		{name: "long detail", status: v1.ProvisioningRequestStatus{ProvisioningClassDetails: details(1, 32768)}},
		{name: "65 details", status: v1.ProvisioningRequestStatus{ProvisioningClassDetails: details(65, 1)}, invalid: true},
		{name: "detail too long", status: v1.ProvisioningRequestStatus{ProvisioningClassDetails: details(1, 32769)}, invalid: true},
		{name: "reason with a space", status: v1.ProvisioningRequestStatus{Conditions: []metav1.Condition{func() metav1.Condition {
			c := good
			c.Reason = "not a reason"
			return c
		}()}}, invalid: true},
		{name: "unknown status value", status: v1.ProvisioningRequestStatus{Conditions: []metav1.Condition{func() metav1.Condition {
			c := good
			c.Status = "Maybe"
			return c
		}()}}, invalid: true},
		// The list-map rejects duplicate keys while building the apply patch, before validation.
		{name: "two conditions of one type", status: v1.ProvisioningRequestStatus{Conditions: []metav1.Condition{good, good}}, refused: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prs.ApplyStatus(ctx, created.Name, tc.status, metav1.ApplyOptions{FieldManager: "validation-test", Force: true})
			if err != nil {
				t.Logf("refused: %v", err)
			}
			switch {
			case tc.invalid && !apierrors.IsInvalid(err):
				t.Errorf("ApplyStatus error = %v, want Invalid", err)
			case tc.refused && err == nil:
				t.Error("ApplyStatus succeeded, want an error")
			case !tc.invalid && !tc.refused && err != nil:
				t.Errorf("ApplyStatus error = %v, want success", err)
			}
		})
	}
}

func TestApplyStatusKeepsOtherManagersConditions(t *testing.T) {
	env, c := setup(t)
	ctx := env.Context()
	prs := c.ProvisioningRequests(env.Namespace)
	created := kueueRequest(t, env, c, "job-b-prov-1", provreq.ClassBestEffortAtomicScaleUp, nil, map[string]int32{"main": 2})
	const autoscaler, checker = "cluster-autoscaler", "capacity-checker"
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)

	// apply writes mgr's own conditions (those of types it owns) plus set.
	apply := func(mgr string, owned []string, force bool, set ...metav1.Condition) (*v1.ProvisioningRequest, error) {
		cur, err := prs.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := v1.ProvisioningRequestStatus{Conditions: provreq.ConditionsOfTypes(cur.Status.Conditions, owned...)}
		for _, c := range set {
			c.ObservedGeneration = cur.Generation
			provreq.SetCondition(&st.Conditions, c, t0)
		}
		return prs.ApplyStatus(ctx, created.Name, st, metav1.ApplyOptions{FieldManager: mgr, Force: force})
	}
	cond := func(condType string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: status, Reason: reason, Message: reason + " (" + condType + ")"}
	}
	types := func(pr *v1.ProvisioningRequest) []string {
		var out []string
		for _, c := range pr.Status.Conditions {
			out = append(out, c.Type+"="+string(c.Status))
		}
		slices.Sort(out)
		return out
	}
	check := func(pr *v1.ProvisioningRequest, want ...string) {
		t.Helper()
		slices.Sort(want)
		if diff := cmp.Diff(want, types(pr)); diff != "" {
			t.Errorf("conditions (-want +got):\n%s", diff)
		}
	}

	pr, err := apply(autoscaler, []string{provreq.ConditionAccepted, provreq.ConditionFailed}, false,
		cond(provreq.ConditionAccepted, metav1.ConditionTrue, provreq.ReasonAccepted))
	if err != nil {
		t.Fatal(err)
	}
	check(pr, "Accepted=True")
	pr, err = apply(checker, []string{provreq.ConditionProvisioned}, false,
		cond(provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound))
	if err != nil {
		t.Fatal(err)
	}
	check(pr, "Accepted=True", "Provisioned=False")
	provisioned := *provreq.FindCondition(pr.Status.Conditions, provreq.ConditionProvisioned)

	// The first manager adds Failed; the checker's Provisioned is untouched.
	pr, err = apply(autoscaler, []string{provreq.ConditionAccepted, provreq.ConditionFailed}, false,
		cond(provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonExpired))
	if err != nil {
		t.Fatal(err)
	}
	check(pr, "Accepted=True", "Failed=True", "Provisioned=False")
	if diff := cmp.Diff(provisioned, *provreq.FindCondition(pr.Status.Conditions, provreq.ConditionProvisioned)); diff != "" {
		t.Errorf("the checker's condition changed (-before +after):\n%s", diff)
	}
	if pr.Generation != created.Generation || !cmp.Equal(pr.Spec, created.Spec) {
		t.Errorf("a status write changed the spec or generation (%d -> %d)", created.Generation, pr.Generation)
	}
	owners := ownersByConditionType(t, pr)
	wantOwners := map[string][]string{"Accepted": {autoscaler}, "Failed": {autoscaler}, "Provisioned": {checker}}
	if diff := cmp.Diff(wantOwners, owners); diff != "" {
		t.Errorf("condition owners (-want +got):\n%s", diff)
	}

	// A manager's apply is its whole intent: leaving out Accepted removes
	// that one, and only that one.
	st := v1.ProvisioningRequestStatus{Conditions: provreq.ConditionsOfTypes(pr.Status.Conditions, provreq.ConditionFailed)}
	pr, err = prs.ApplyStatus(ctx, created.Name, st, metav1.ApplyOptions{FieldManager: autoscaler})
	if err != nil {
		t.Fatal(err)
	}
	check(pr, "Failed=True", "Provisioned=False")

	// Changing another manager's condition is a conflict unless forced.
	_, err = apply(checker, []string{provreq.ConditionProvisioned}, false, cond(provreq.ConditionFailed, metav1.ConditionFalse, "Retrying"))
	if !apierrors.IsConflict(err) {
		t.Errorf("unforced apply over another manager's condition: error %v, want Conflict", err)
	}
	pr, err = apply(checker, []string{provreq.ConditionProvisioned}, true, cond(provreq.ConditionFailed, metav1.ConditionFalse, "Retrying"))
	if err != nil {
		t.Fatal(err)
	}
	check(pr, "Failed=False", "Provisioned=False")
	if got := ownersByConditionType(t, pr)["Failed"]; !slices.Contains(got, checker) {
		t.Errorf("forced apply: Failed owned by %q, want %q among them", got, checker)
	}

	// Errors.
	if _, err := prs.ApplyStatus(ctx, "missing", st, metav1.ApplyOptions{FieldManager: autoscaler}); !apierrors.IsNotFound(err) {
		t.Errorf("ApplyStatus of a missing request: %v, want NotFound", err)
	}
	if _, err := prs.ApplyStatus(ctx, created.Name, st, metav1.ApplyOptions{}); err == nil {
		t.Error("ApplyStatus without a field manager succeeded")
	}
}

// ownersByConditionType maps each condition type to the Apply managers that
// own a field of it, from the object's managed fields.
func ownersByConditionType(t *testing.T, pr *v1.ProvisioningRequest) map[string][]string {
	t.Helper()
	owners := map[string][]string{}
	for _, mf := range pr.ManagedFields {
		if mf.Operation != metav1.ManagedFieldsOperationApply || mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		raw := mf.FieldsV1.GetRawString()
		for _, c := range pr.Status.Conditions {
			if strings.Contains(raw, `"k:{\"type\":\"`+c.Type+`\"}"`) {
				owners[c.Type] = append(owners[c.Type], mf.Manager)
			}
		}
	}
	return owners
}
