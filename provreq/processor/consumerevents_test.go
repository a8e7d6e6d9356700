package processor

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

// TestConsumingPodEventsAsUpstream: each pod set aside for a live request
// (ours or another instance's) gets upstream's Normal event with no reason,
// at most 50 a loop; a pod of a missing request gets the not-live event
// instead, and an ordinary pod none.
func TestConsumingPodEventsAsUpstream(t *testing.T) {
	c := &cluster{fits: true}
	c.addRequest("live", provreq.ClassCheckCapacity, 100, nil, t0)
	c.addRequest("elsewhere", provreq.ClassCheckCapacity, 1, map[string]string{"processorInstance": "other"}, t0)
	events := record.NewFakeRecorder(200)
	p := New(testOptions(), c, c, c, c.rollback, WithEventRecorder(events))
	pending := []*apiv1.Pod{consumer("elsewhere", false), consumer("missing", false),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ordinary"}}}
	for i := 0; i < 60; i++ {
		pod := consumer("live", false)
		pod.Name = fmt.Sprintf("w-live-%d", i)
		pending = append(pending, pod)
	}
	loop(p, c, t0, nil, pending)
	close(events.Events)
	var consuming, other []string
	for e := range events.Events {
		if e == "Normal  Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest ns/elsewhere" ||
			e == "Normal  Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest ns/live" {
			consuming = append(consuming, e)
			continue
		}
		other = append(other, e)
	}
	if len(consuming) != 50 {
		t.Fatalf("%d consuming-pod events, want upstream's cap of 50", len(consuming))
	}
	if consuming[0] != "Normal  Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest ns/elsewhere" {
		t.Errorf("first event %q, want the first set-aside pod's (request elsewhere)", consuming[0])
	}
	want := []string{"Normal ProvisioningRequestNotLive Pod consumes ProvisioningRequest ns/missing, which is missing, failed or over: it is treated as an ordinary pending pod"}
	var notLive []string
	for _, e := range other {
		if len(e) > 33 && e[:33] == "Normal ProvisioningRequestNotLive" {
			notLive = append(notLive, e)
		}
	}
	if diff := cmp.Diff(want, notLive); diff != "" {
		t.Errorf("not-live events (-want +got):\n%s", diff)
	}
}
