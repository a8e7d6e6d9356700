package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// recordingTrigger records what the handlers asked of the runner.
type recordingTrigger struct{ calls []string }

func (r *recordingTrigger) Trigger()              { r.calls = append(r.calls, "loop") }
func (r *recordingTrigger) PodTrigger(key string) { r.calls = append(r.calls, "pod "+key) }
func (r *recordingTrigger) PodArrived(key string, counted bool) {
	c := "arrived " + key
	if counted {
		c += " counted"
	}
	r.calls = append(r.calls, c)
}

func unschedulablePod(name, scheduler string, since time.Time) *apiv1.Pod {
	return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: apiv1.PodSpec{SchedulerName: scheduler},
		Status: apiv1.PodStatus{Phase: apiv1.PodPending, Conditions: []apiv1.PodCondition{{
			Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse, Reason: apiv1.PodReasonUnschedulable,
			LastTransitionTime: metav1.NewTime(since)}}}}
}

func TestUnschedulablePodTriggerReadsTheInjectedClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	fresh := unschedulablePod("fresh", "default-scheduler", now.Add(-9*time.Second))
	old := unschedulablePod("old", "default-scheduler", now.Add(-10*time.Second))
	other := unschedulablePod("other", "someone-else", now)
	bypassed := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bypassed"},
		Spec: apiv1.PodSpec{SchedulerName: "batch"}, Status: apiv1.PodStatus{Phase: apiv1.PodPending}}
	tests := []struct {
		name   string
		update bool
		pod    *apiv1.Pod
		want   []string
	}{
		{name: "new pod marked within ten seconds", pod: fresh,
			want: []string{"arrived " + WorkloadKey(fresh), "pod " + WorkloadKey(fresh)}},
		{name: "new pod marked ten seconds ago", pod: old, want: []string{"arrived " + WorkloadKey(old)}},
		{name: "update marked within ten seconds", update: true, pod: fresh, want: []string{"pod " + WorkloadKey(fresh)}},
		{name: "update marked ten seconds ago", update: true, pod: old},
		{name: "scheduler not allowed", pod: other},
		{name: "pod of a bypassed scheduler", pod: bypassed,
			want: []string{"arrived " + WorkloadKey(bypassed) + " counted", "pod " + WorkloadKey(bypassed)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recordingTrigger{}
			h := UnschedulablePodTrigger(r, clocktesting.NewFakePassiveClock(now), []string{"default-scheduler", "batch"},
				[]string{"batch"}, func(p *apiv1.Pod) bool { return p.Spec.SchedulerName == "batch" })
			if tt.update {
				h.OnUpdate(tt.pod, tt.pod)
			} else {
				h.OnAdd(tt.pod, false)
			}
			if diff := cmp.Diff(tt.want, r.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeJoinTrigger(t *testing.T) {
	node := func(ready apiv1.ConditionStatus) *apiv1.Node {
		return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
			Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: ready}}}}
	}
	tests := []struct {
		name    string
		waiting bool
		run     func(h cache.ResourceEventHandler)
		want    []string
	}{
		{name: "node registers while a request waits", waiting: true,
			run: func(h cache.ResourceEventHandler) {
				h.OnAdd(node(apiv1.ConditionFalse), false)
			}, want: []string{"loop"}},
		{name: "initial list", waiting: true, run: func(h cache.ResourceEventHandler) {
			h.OnAdd(node(apiv1.ConditionTrue), true)
		}},
		{name: "node turns ready", waiting: true, run: func(h cache.ResourceEventHandler) {
			h.OnUpdate(node(apiv1.ConditionFalse), node(apiv1.ConditionTrue))
		}, want: []string{"loop"}},
		{name: "heartbeat", waiting: true, run: func(h cache.ResourceEventHandler) {
			h.OnUpdate(node(apiv1.ConditionTrue), node(apiv1.ConditionTrue))
		}},
		{name: "nothing waits", run: func(h cache.ResourceEventHandler) {
			h.OnAdd(node(apiv1.ConditionTrue), false)
			h.OnUpdate(node(apiv1.ConditionFalse), node(apiv1.ConditionTrue))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recordingTrigger{}
			tt.run(NodeJoinTrigger(r, func() bool { return tt.waiting }))
			if diff := cmp.Diff(tt.want, r.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}
