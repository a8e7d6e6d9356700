package processor

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// TestConditionMessagesNameTheRefusal: a check-capacity request whose pods
// do not fit is told why the session found (the device class its pods
// claim that no node offers), retried or not; an atomic request no group
// can ever hold is Failed with the session's reason. The reasons stay
// upstream's (CapacityIsNotFound) and ours (CapacityCanNeverFit): only the
// messages carry the cause.
func TestConditionMessagesNameTheRefusal(t *testing.T) {
	const devices = "no node offers 8 devices of class gpu.example.com"
	now := t0.Add(time.Minute)
	next := now.Add(time.Minute).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name    string
		class   string
		params  map[string]string
		refusal string
		atomic  string
		typ     string
		reason  string
		want    string
	}{
		{name: "check-capacity, cause unknown", class: provreq.ClassCheckCapacity, typ: provreq.ConditionProvisioned,
			reason: provreq.ReasonCapacityIsNotFound,
			want:   "The 2 pods do not all fit the cluster's current nodes; next check at " + next + "."},
		{name: "check-capacity", class: provreq.ClassCheckCapacity, refusal: devices, typ: provreq.ConditionProvisioned,
			reason: provreq.ReasonCapacityIsNotFound,
			want:   "The 2 pods do not all fit the cluster's current nodes: " + devices + "; next check at " + next + "."},
		{name: "check-capacity, noRetry", class: provreq.ClassCheckCapacity, params: map[string]string{"noRetry": "true"},
			refusal: devices, typ: provreq.ConditionFailed, reason: provreq.ReasonCapacityIsNotFound,
			want: "The 2 pods do not all fit the cluster's current nodes: " + devices + ", and noRetry is set."},
		{name: "atomic", class: provreq.ClassBestEffortAtomicScaleUp, refusal: devices,
			atomic: "none of the 2 pods fit: no node group offers 8 devices of class gpu.example.com on one node",
			typ:    provreq.ConditionFailed, reason: ReasonCapacityCanNeverFit,
			want: "The 2 pods can never all fit, even with every node group at its max size within the cluster limits: " +
				"none of the 2 pods fit: no node group offers 8 devices of class gpu.example.com on one node."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{refusal: tc.refusal, atomic: scaleup.AtomicResult{Reason: tc.atomic, Permanent: true}}
			pr := c.addRequest("r", tc.class, 2, tc.params, t0)
			p := newTestProcessor(c, nil)
			loop(p, c, now, nil, nil)
			status := metav1.ConditionTrue // Failed
			if tc.typ == provreq.ConditionProvisioned {
				status = metav1.ConditionFalse
			}
			wantCond(t, pr, tc.typ, status, tc.reason)
			if diff := cmp.Diff(tc.want, cond(t, pr, tc.typ).Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}
