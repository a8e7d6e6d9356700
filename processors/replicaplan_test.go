package processors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// planLoop is one loop of a ReplicaSet "a" of the given replicas: bound
// pods on a node and marked pending pods.
func planLoop(now time.Time, bound, pending int) (*Loop, []*apiv1.Pod) {
	loop := &Loop{Now: now}
	for i := 0; i < bound; i++ {
		p := burstPod(fmt.Sprintf("a-bound-%d", i), "a", "1", false)
		p.Spec.NodeName = "n"
		loop.ScheduledPods = append(loop.ScheduledPods, p)
	}
	for i := 0; i < pending; i++ {
		loop.PendingPods = append(loop.PendingPods, burstPod(fmt.Sprintf("a-pending-%d", i), "a", "1", true))
	}
	return loop, loop.PendingPods
}

func booked(r *ReplicaPlans) int {
	n := 0
	for _, b := range r.bookings {
		n += b.count
	}
	return n
}

// A ReplicaSet of 10,000 replicas with an injection limit of 5,000 is
// counted in consecutive pieces: the room the first decision made for its
// replicas is held (booked) in the next loops, and the stand-ins start after
// it instead of sliding by the pods bound in between, once half the
// replicas planned before exist.
func TestReplicaPlansCountConsecutivePieces(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	replicas := int32(10000)
	_ = indexer.Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "a"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}})
	plans := NewReplicaPlans(15 * time.Minute)
	u := UnschedulablePods{ReplicaSets: appslisters.NewReplicaSetLister(indexer), InjectionLimit: 5000, Plans: plans}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	done := func(loop *Loop, pods []*apiv1.Pod, res scaleup.Result) {
		plans.ScaleUpDone(ctx, loop, ScaleUpStatus{Pods: pods, Result: res})
	}
	ok := scaleup.Result{Remaining: map[*apiv1.Pod]string{}}

	// Loop 1: 500 pods exist, all marked: 4,500 stand-ins fill the limit.
	loop, pending := planLoop(t0, 0, 500)
	pods := u.ProcessPods(ctx, loop, pending)
	if len(pods) != 5000 || booked(plans) != 0 {
		t.Fatalf("loop 1: %d pods, %d booked; want 5000, 0", len(pods), booked(plans))
	}
	done(loop, pods, ok)
	if got := plans.planned("a"); got != 5000 {
		t.Fatalf("after loop 1 the plan covers %d replicas, want 5000", got)
	}

	// Loop 2: 1,800 pods exist, 300 of them bound. The 3,200 planned
	// replicas neither bound nor marked are booked; fewer pods exist than
	// half the 5,000 planned, so no further piece is counted yet.
	loop, pending = planLoop(t0.Add(5*time.Second), 300, 1500)
	pods = u.ProcessPods(ctx, loop, pending)
	if len(pods) != 1500 || booked(plans) != 3200 {
		t.Errorf("loop 2: %d pods, %d booked; want 1500, 3200", len(pods), booked(plans))
	}
	done(loop, pods, ok)
	if got := plans.planned("a"); got != 5000 {
		t.Fatalf("after loop 2 the plan covers %d replicas, want 5000", got)
	}

	// Loop 3: 2,800 pods exist, 300 of them bound: the 2,200 planned
	// replicas neither bound nor marked are booked, and, half the plan
	// having arrived, the stand-ins are replicas 5,000 on, as many as the
	// limit leaves room for.
	loop, pending = planLoop(t0.Add(10*time.Second), 300, 2500)
	pods = u.ProcessPods(ctx, loop, pending)
	if booked(plans) != 2200 {
		t.Errorf("loop 3: %d booked, want 2200", booked(plans))
	}
	if len(pods) != 5000 { // 2,500 marked + 2,500 stand-ins
		t.Errorf("loop 3: %d pods, want 5000", len(pods))
	}
	if last := pods[len(pods)-1]; last.Name != "a-upcoming-7499" {
		t.Errorf("loop 3: last stand-in %s, want a-upcoming-7499 (replicas 5000-7499)", last.Name)
	}
	done(loop, pods, ok)
	if got := plans.planned("a"); got != 7500 {
		t.Fatalf("after loop 3 the plan covers %d replicas, want 7500", got)
	}

	// Loop 4: all 10,000 exist; 8,000 marked, 2,000 bound: nothing to book
	// or count ahead.
	loop, pending = planLoop(t0.Add(20*time.Second), 2000, 8000)
	pods = u.ProcessPods(ctx, loop, pending)
	if len(pods) != 8000 || booked(plans) != 0 {
		t.Errorf("loop 4: %d pods, %d booked; want 8000, 0", len(pods), booked(plans))
	}
	done(loop, pods, ok)

	// Once every planned replica is bound, the plan is gone.
	loop, pending = planLoop(t0.Add(30*time.Second), 9000, 0)
	u.ProcessPods(ctx, loop, pending)
	if got := plans.planned("a"); got != 0 {
		t.Errorf("with 9,000 of 7,500 planned replicas bound the plan still covers %d", got)
	}
}

// A plan grows only by a scale-up that ran, without errors, and left no pod
// of the ReplicaSet without room; a plan expires, and goes with its
// ReplicaSet.
func TestReplicaPlansGrowOnlyOnSuccess(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	replicas := int32(10000)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "a"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}}
	_ = indexer.Add(rs)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		result func(pods []*apiv1.Pod) scaleup.Result
		drop   int // stand-ins a later processor dropped
		want   int
	}{
		{"success", func([]*apiv1.Pod) scaleup.Result { return scaleup.Result{Remaining: map[*apiv1.Pod]string{}} }, 0, 5000},
		{"scale-up did not run", func([]*apiv1.Pod) scaleup.Result { return scaleup.Result{} }, 0, 0},
		{"an increase failed", func([]*apiv1.Pod) scaleup.Result {
			return scaleup.Result{Remaining: map[*apiv1.Pod]string{}, Errors: []error{fmt.Errorf("out of capacity")}}
		}, 0, 0},
		{"a stand-in left without room", func(pods []*apiv1.Pod) scaleup.Result {
			return scaleup.Result{Remaining: map[*apiv1.Pod]string{pods[len(pods)-1]: "max size"}}
		}, 0, 0},
		{"a real pod left without room", func(pods []*apiv1.Pod) scaleup.Result {
			return scaleup.Result{Remaining: map[*apiv1.Pod]string{pods[0]: "max size"}}
		}, 0, 0},
		{"stand-ins dropped before the scale-up", func([]*apiv1.Pod) scaleup.Result {
			return scaleup.Result{Remaining: map[*apiv1.Pod]string{}}
		}, 10, 0},
	} {
		plans := NewReplicaPlans(15 * time.Minute)
		u := UnschedulablePods{ReplicaSets: appslisters.NewReplicaSetLister(indexer), InjectionLimit: 5000, Plans: plans}
		loop, pending := planLoop(t0, 0, 500)
		pods := u.ProcessPods(ctx, loop, pending)
		passed := pods[:len(pods)-tc.drop]
		plans.ScaleUpDone(ctx, loop, ScaleUpStatus{Pods: passed, Result: tc.result(passed)})
		if got := plans.planned("a"); got != tc.want {
			t.Errorf("%s: plan covers %d replicas, want %d", tc.name, got, tc.want)
		}
	}

	plans := NewReplicaPlans(15 * time.Minute)
	u := UnschedulablePods{ReplicaSets: appslisters.NewReplicaSetLister(indexer), InjectionLimit: 5000, Plans: plans}
	loop, pending := planLoop(t0, 0, 500)
	pods := u.ProcessPods(ctx, loop, pending)
	plans.ScaleUpDone(ctx, loop, ScaleUpStatus{Pods: pods, Result: scaleup.Result{Remaining: map[*apiv1.Pod]string{}}})
	// Past the TTL the plan no longer holds room.
	loop, pending = planLoop(t0.Add(16*time.Minute), 0, 0)
	u.ProcessPods(ctx, loop, pending)
	if plans.planned("a") != 0 || booked(plans) != 0 {
		t.Errorf("an expired plan still covers %d replicas (%d booked)", plans.planned("a"), booked(plans))
	}
	// A plan whose ReplicaSet is gone is dropped.
	loop, pending = planLoop(t0.Add(17*time.Minute), 0, 500)
	pods = u.ProcessPods(ctx, loop, pending)
	plans.ScaleUpDone(ctx, loop, ScaleUpStatus{Pods: pods, Result: scaleup.Result{Remaining: map[*apiv1.Pod]string{}}})
	_ = indexer.Delete(rs)
	loop, _ = planLoop(t0.Add(18*time.Minute), 0, 0)
	u.ProcessPods(ctx, loop, nil)
	if plans.planned("a") != 0 || booked(plans) != 0 {
		t.Errorf("the plan of a deleted ReplicaSet still covers %d replicas (%d booked)", plans.planned("a"), booked(plans))
	}
}

// refusedReplicaSet is a ReplicaSet "a" of the given replicas whose
// controller's creations are refused when refused is set.
func refusedReplicaSet(replicas int32, refused bool) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "a"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}}
	if refused {
		rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure,
			Status: apiv1.ConditionTrue, Reason: "FailedCreate"}}
	}
	return rs
}

// A ReplicaSet of a million replicas in a namespace whose quota allows 10
// pods: before the controller's first refusal is seen, one piece (the limit)
// is counted ahead; after it, no further piece is, whether the refusal is
// seen (ReplicaFailure: no stand-ins, room held only for the pods that
// exist) or not (fewer pods exist than half the piece).
func TestReplicaPlansBoundedByWhatArrives(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := scaleup.Result{Remaining: map[*apiv1.Pod]string{}}
	type step struct {
		refused               bool
		bound, pending        int
		pods, booked, planned int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"refusal seen from the start", []step{
			{refused: true, pending: 10, pods: 10},
			{refused: true, pending: 10, pods: 10},
			{refused: true, bound: 8, pending: 2, pods: 2},
		}},
		{"refusal seen after the first piece", []step{
			{pending: 10, pods: 40, planned: 40},
			{refused: true, pending: 10, pods: 10, planned: 40},
			{refused: true, bound: 4, pending: 6, pods: 6, planned: 40},
		}},
		{"refusal never seen", []step{
			{pending: 10, pods: 40, planned: 40},
			{pending: 10, pods: 10, booked: 30, planned: 40},
			{bound: 8, pending: 2, pods: 2, booked: 30, planned: 40},
			{bound: 10, pending: 0, pods: 0, booked: 30, planned: 40},
		}},
		{"the pods come after all", []step{
			{pending: 10, pods: 40, planned: 40},
			{bound: 10, pending: 10, pods: 40, booked: 20, planned: 70},
		}},
		{"the pods come and fit the room made for them", []step{
			{pending: 10, pods: 40, planned: 40},
			{bound: 19, pods: 0, booked: 21, planned: 40},
			{bound: 20, pods: 40, booked: 20, planned: 80},
			{bound: 39, pods: 0, booked: 41, planned: 80},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			plans := NewReplicaPlans(15 * time.Minute)
			u := UnschedulablePods{ReplicaSets: appslisters.NewReplicaSetLister(indexer), InjectionLimit: 40, Plans: plans}
			for i, s := range tc.steps {
				_ = indexer.Update(refusedReplicaSet(1000000, s.refused))
				loop, pending := planLoop(t0.Add(time.Duration(i)*10*time.Second), s.bound, s.pending)
				pods := u.ProcessPods(ctx, loop, pending)
				got := step{refused: s.refused, bound: s.bound, pending: s.pending, pods: len(pods), booked: booked(plans)}
				plans.ScaleUpDone(ctx, loop, ScaleUpStatus{Pods: pods, Result: ok})
				got.planned = plans.planned("a")
				if diff := cmp.Diff(s, got, cmp.AllowUnexported(step{})); diff != "" {
					t.Errorf("loop %d (-want +got):\n%s", i+1, diff)
				}
			}
		})
	}
}
