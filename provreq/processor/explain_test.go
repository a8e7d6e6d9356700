package processor

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

// TestExplainerRecordsConditions: the conditions a loop sets on a
// check-capacity request are kept for the explainer, per request.
func TestExplainerRecordsConditions(t *testing.T) {
	for _, tc := range []struct {
		name string
		fits bool
		want []explain.Condition
	}{
		{name: "fits", fits: true, want: []explain.Condition{
			{Type: provreq.ConditionAccepted, Status: "True", Reason: provreq.ReasonAccepted},
			{Type: provreq.ConditionProvisioned, Status: "True", Reason: provreq.ReasonCapacityIsFound,
				Message: "All 2 pods fit the cluster's current nodes; the capacity is reserved for 10m0s."}}},
		{name: "does not fit", want: []explain.Condition{
			{Type: provreq.ConditionAccepted, Status: "True", Reason: provreq.ReasonAccepted},
			{Type: provreq.ConditionProvisioned, Status: "False", Reason: provreq.ReasonCapacityIsNotFound,
				Message: "The 2 pods do not all fit the cluster's current nodes; next check at"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{fits: tc.fits}
			c.addRequest("a", provreq.ClassCheckCapacity, 2, nil, t0)
			rec := explain.NewRecorder()
			p := newTestProcessor(c, nil)
			WithExplainer(rec)(p)
			now := t0.Add(time.Second)
			rec.BeginLoop(now)
			loop(p, c, now, nil, nil)
			rec.EndLoop()
			got := rec.RequestConditions("ns/a")
			// The accepted message and the retry time are not the point.
			prefix := cmp.Comparer(func(a, b explain.Condition) bool {
				return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason &&
					(strings.HasPrefix(a.Message, b.Message) || strings.HasPrefix(b.Message, a.Message))
			})
			if diff := cmp.Diff(tc.want, got, prefix, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}
