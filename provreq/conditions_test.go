package provreq

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

func cond(condType string, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: reason + " message",
		LastTransitionTime: metav1.NewTime(at),
	}
}

func withGeneration(c metav1.Condition, generation int64) metav1.Condition {
	c.ObservedGeneration = generation
	return c
}

func TestSetCondition(t *testing.T) {
	tests := []struct {
		name        string
		conds       []metav1.Condition
		set         metav1.Condition
		wantChanged bool
		want        []metav1.Condition
	}{
		{
			name:        "adds to empty, zero time means now",
			set:         metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted, Message: "m"},
			wantChanged: true,
			want:        []metav1.Condition{{Type: ConditionAccepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted, Message: "m", LastTransitionTime: metav1.NewTime(t1)}},
		},
		{
			name:        "appends a new type, keeps others",
			conds:       []metav1.Condition{cond(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted, t0)},
			set:         cond(ConditionProvisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound, time.Time{}),
			wantChanged: true,
			want: []metav1.Condition{
				cond(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted, t0),
				cond(ConditionProvisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound, t1),
			},
		},
		{
			name:        "same status: reason and message follow, time stays",
			conds:       []metav1.Condition{cond(ConditionProvisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound, t0)},
			set:         cond(ConditionProvisioned, metav1.ConditionFalse, ReasonFailedToCheckCapacity, time.Time{}),
			wantChanged: true,
			want:        []metav1.Condition{cond(ConditionProvisioned, metav1.ConditionFalse, ReasonFailedToCheckCapacity, t0)},
		},
		{
			name:        "status flips: time moves",
			conds:       []metav1.Condition{cond(ConditionProvisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound, t0)},
			set:         cond(ConditionProvisioned, metav1.ConditionTrue, ReasonCapacityIsFound, time.Time{}),
			wantChanged: true,
			want:        []metav1.Condition{cond(ConditionProvisioned, metav1.ConditionTrue, ReasonCapacityIsFound, t1)},
		},
		{
			name:        "identical: no change",
			conds:       []metav1.Condition{cond(ConditionFailed, metav1.ConditionTrue, ReasonExpired, t0)},
			set:         cond(ConditionFailed, metav1.ConditionTrue, ReasonExpired, time.Time{}),
			wantChanged: false,
			want:        []metav1.Condition{cond(ConditionFailed, metav1.ConditionTrue, ReasonExpired, t0)},
		},
		{
			name:        "observed generation follows",
			conds:       []metav1.Condition{cond(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted, t0)},
			set:         withGeneration(cond(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted, t1), 2),
			wantChanged: true,
			want:        []metav1.Condition{withGeneration(cond(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted, t0), 2)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conds := tc.conds
			changed := SetCondition(&conds, tc.set, t1)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if diff := cmp.Diff(tc.want, conds); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindAndIsTrue(t *testing.T) {
	conds := []metav1.Condition{
		cond(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted, t0),
		cond(ConditionProvisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound, t0),
	}
	if c := FindCondition(conds, ConditionProvisioned); c == nil || c.Reason != ReasonCapacityIsNotFound {
		t.Errorf("FindCondition(Provisioned) = %+v", c)
	}
	if c := FindCondition(conds, ConditionFailed); c != nil {
		t.Errorf("FindCondition(Failed) = %+v, want nil", c)
	}
	for condType, want := range map[string]bool{ConditionAccepted: true, ConditionProvisioned: false, ConditionFailed: false} {
		if got := IsConditionTrue(conds, condType); got != want {
			t.Errorf("IsConditionTrue(%s) = %v, want %v", condType, got, want)
		}
	}
	if !RemoveCondition(&conds, ConditionAccepted) || len(conds) != 1 || RemoveCondition(&conds, ConditionAccepted) {
		t.Errorf("RemoveCondition: left %+v", conds)
	}
}

func TestConditionsOfTypes(t *testing.T) {
	conds := []metav1.Condition{
		cond("example.com/Queued", metav1.ConditionTrue, "Queued", t0),
		cond(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted, t0),
		cond(ConditionProvisioned, metav1.ConditionTrue, ReasonCapacityIsFound, t0),
	}
	got := ConditionsOfTypes(conds, ConditionTypes()...)
	want := conds[1:]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ConditionsOfTypes (-want +got):\n%s", diff)
	}
	got[0].Reason = "Changed"
	if conds[1].Reason != ReasonAccepted {
		t.Error("ConditionsOfTypes returned an alias of its input")
	}
	if got := ConditionsOfTypes(conds); got != nil {
		t.Errorf("ConditionsOfTypes with no types = %+v, want nil", got)
	}
}
