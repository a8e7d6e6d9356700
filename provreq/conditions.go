package provreq

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a ProvisioningRequest. Clients such as Kueue act on
// Status=True of each.
const (
	// ConditionAccepted: the autoscaler has started working on the request.
	ConditionAccepted = "Accepted"
	// ConditionProvisioned: True once the capacity is there and booked for
	// the request's pods; False (with a message saying why and what
	// next) while the autoscaler is still trying.
	ConditionProvisioned = "Provisioned"
	// ConditionFailed: the request will not be provisioned; clients may
	// retry with a new request.
	ConditionFailed = "Failed"
	// ConditionBookingExpired: the capacity is no longer held for the
	// request, because its booking time ran out or its pods consumed it.
	ConditionBookingExpired = "BookingExpired"
	// ConditionCapacityRevoked: capacity that was provisioned for the
	// request has been lost.
	ConditionCapacityRevoked = "CapacityRevoked"
)

// Condition reasons, as upstream writes them (clients may match on them).
const (
	// ReasonAccepted goes with Accepted=True.
	ReasonAccepted = "Accepted"
	// ReasonCapacityIsFound goes with Provisioned=True when the pods fit
	// without adding nodes.
	ReasonCapacityIsFound = "CapacityIsFound"
	// ReasonCapacityIsProvisioned goes with Provisioned=True after a
	// successful scale-up.
	ReasonCapacityIsProvisioned = "CapacityIsProvisioned"
	// ReasonCapacityIsNotFound goes with Provisioned=False (will retry) or
	// Failed=True (no retry).
	ReasonCapacityIsNotFound = "CapacityIsNotFound"
	// ReasonFailedToCheckCapacity goes with Provisioned=False when the
	// simulation itself failed.
	ReasonFailedToCheckCapacity = "FailedToCheckCapacity"
	// ReasonFailedToCreatePods goes with Failed=True when the request's
	// pods cannot be built, for example a PodTemplate is missing.
	ReasonFailedToCreatePods = "FailedToCreatePods"
	// ReasonFailedToBookCapacity goes with Failed=True when provisioned
	// capacity could not be booked.
	ReasonFailedToBookCapacity = "FailedToBookCapacity"
	// ReasonCapacityReservationTimeExpired goes with BookingExpired=True
	// when the booking time ran out.
	ReasonCapacityReservationTimeExpired = "CapacityReservationTimeExpired"
	// ReasonCapacityBookingConsumed goes with BookingExpired=True when
	// all the request's pods are scheduled.
	ReasonCapacityBookingConsumed = "CapacityBookingConsumed"
	// ReasonExpired goes with Failed=True when the request was not
	// provisioned in time.
	ReasonExpired = "Expired"
)

// ConditionTypes returns the condition types the autoscaler writes, in the
// order of a request's life.
func ConditionTypes() []string {
	return []string{
		ConditionAccepted, ConditionProvisioned, ConditionFailed,
		ConditionBookingExpired, ConditionCapacityRevoked,
	}
}

// FindCondition returns the condition of the given type, or nil.
func FindCondition(conds []metav1.Condition, condType string) *metav1.Condition {
	return meta.FindStatusCondition(conds, condType)
}

// IsConditionTrue reports whether the condition of the given type is there
// with Status=True.
func IsConditionTrue(conds []metav1.Condition, condType string) bool {
	return meta.IsStatusConditionTrue(conds, condType)
}

// SetCondition adds c to conds or updates the condition of its type, with
// the semantics of apimachinery's meta.SetStatusCondition: reason, message
// and observedGeneration always follow c, but lastTransitionTime only moves
// when the status changes. A zero c.LastTransitionTime means now (the clock
// is the caller's, never time.Now). It reports whether conds changed.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition, now time.Time) bool {
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	return meta.SetStatusCondition(conds, c)
}

// RemoveCondition removes the condition of the given type and reports
// whether there was one.
func RemoveCondition(conds *[]metav1.Condition, condType string) bool {
	return meta.RemoveStatusCondition(conds, condType)
}

// ConditionsOfTypes returns copies of the conditions whose type is one of
// types, in the order of conds. With server-side apply a field manager
// declares every condition it owns in each request (one it leaves out is
// removed), so a writer builds its apply from this, e.g.
// ConditionsOfTypes(pr.Status.Conditions, ConditionTypes()...), plus its
// change.
func ConditionsOfTypes(conds []metav1.Condition, types ...string) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		for _, t := range types {
			if c.Type == t {
				out = append(out, *c.DeepCopy())
				break
			}
		}
	}
	return out
}
