package processors

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

func burstPod(name, owner, cpu string, marked bool) *apiv1.Pod {
	yes := true
	p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: apiv1.PodStatus{Phase: apiv1.PodPending}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: owner, UID: types.UID(owner), Controller: &yes}}
	}
	if marked {
		p.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse,
			Reason: apiv1.PodReasonUnschedulable}}
	}
	return p
}

// The scheduler has marked one pod of a burst; its untried twins are counted
// with it, and nothing else is.
func TestTwinsOfUnschedulablePods(t *testing.T) {
	pending := []*apiv1.Pod{burstPod("a-0", "a", "1", true)}
	for i := 1; i <= 3; i++ {
		pending = append(pending, burstPod(fmt.Sprintf("a-%d", i), "a", "1", false))
	}
	deleting := burstPod("a-4", "a", "1", false)
	deleting.DeletionTimestamp = &metav1.Time{}
	tried := burstPod("a-5", "a", "1", false) // tried, then failed for another reason
	tried.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse, Reason: "SchedulerError"}}
	pending = append(pending, deleting, tried,
		burstPod("b-0", "b", "1", false),     // another workload, not marked
		burstPod("a-other", "a", "2", false), // the same workload with another spec (a rollout)
		burstPod("bare", "", "1", false))     // a bare pod
	got := map[string]bool{}
	for _, p := range twins(context.Background(), pending) {
		got[p.Name] = true
	}
	want := map[string]bool{"a-0": true, "a-1": true, "a-2": true, "a-3": true}
	if len(got) != len(want) {
		t.Fatalf("twins = %v, want %v", got, want)
	}
	for n := range want {
		if !got[n] {
			t.Errorf("%s missing from %v", n, got)
		}
	}
	if n := len(twins(context.Background(), pending[1:])); n != 0 {
		t.Errorf("without a marked pod %d pods counted, want 0", n)
	}
}

func TestUpcomingReplicasOfAScalingReplicaSet(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	replicas := int32(10)
	_ = indexer.Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "a"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}})
	u := UnschedulablePods{ReplicaSets: appslisters.NewReplicaSetLister(indexer), InjectionLimit: 5000}
	marked := burstPod("a-0", "a", "1", true)
	untried := burstPod("a-1", "a", "1", false)
	scheduled := burstPod("a-2", "a", "1", false)
	scheduled.Spec.NodeName = "n"
	terminating := burstPod("a-3", "a", "1", false)
	terminating.Spec.NodeName = "n"
	terminating.DeletionTimestamp = &metav1.Time{}
	other := burstPod("b-0", "b", "1", true) // its ReplicaSet is not known: nothing counted for it
	obs := &Loop{PendingPods: []*apiv1.Pod{marked, untried, other},
		ScheduledPods: []*apiv1.Pod{scheduled, terminating}}
	up := u.upcomingReplicas(context.Background(), []*apiv1.Pod{marked, untried, other}, obs)
	if len(up) != 7 { // 10 wanted, 3 active (the terminating pod does not count)
		t.Fatalf("%d upcoming replicas, want 7", len(up))
	}
	seen := map[types.UID]bool{}
	for _, p := range up {
		if !IsUpcomingReplica(p) || seen[p.UID] || p.Spec.NodeName != "" {
			t.Errorf("stand-in %s (uid %s) is not a distinct upcoming replica", p.Name, p.UID)
		}
		seen[p.UID] = true
	}
	if IsUpcomingReplica(marked) {
		t.Error("a real pod taken for an upcoming replica")
	}
	// A scaled-down ReplicaSet has nothing upcoming.
	replicas = 2
	if up := u.upcomingReplicas(context.Background(), []*apiv1.Pod{marked}, obs); len(up) != 0 {
		t.Errorf("%d upcoming replicas of a ReplicaSet with more pods than replicas", len(up))
	}
	// Nor has one whose pods are refused (a quota, a webhook).
	replicas = 10
	_ = indexer.Update(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "a"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}, Status: appsv1.ReplicaSetStatus{Conditions: []appsv1.ReplicaSetCondition{
			{Type: appsv1.ReplicaSetReplicaFailure, Status: apiv1.ConditionTrue, Reason: "FailedCreate"}}}})
	if up := u.upcomingReplicas(context.Background(), []*apiv1.Pod{marked}, obs); len(up) != 0 {
		t.Errorf("%d upcoming replicas of a ReplicaSet whose pods are refused", len(up))
	}
}

func withScheduler(p *apiv1.Pod, name string) *apiv1.Pod {
	p.Spec.SchedulerName = name
	return p
}

// --allowed-scheduler-names keeps only the pods of the listed schedulers;
// --bypassed-scheduler-names counts their pods before the scheduler has
// processed them.
func TestSchedulerNames(t *testing.T) {
	marked := burstPod("default-marked", "", "1", true) // no scheduler name: the default scheduler's
	otherMarked := withScheduler(burstPod("other-marked", "", "1", true), "other")
	fastNew := withScheduler(burstPod("fast-new", "", "1", false), "fast")
	fastBlank := withScheduler(burstPod("fast-blank-reason", "", "1", false), "fast")
	fastBlank.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse}}
	fastError := withScheduler(burstPod("fast-error", "", "1", false), "fast")
	fastError.Status.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionFalse, Reason: "SchedulerError"}}
	fastDeleting := withScheduler(burstPod("fast-deleting", "", "1", false), "fast")
	fastDeleting.DeletionTimestamp = &metav1.Time{}
	slowNew := withScheduler(burstPod("slow-new", "", "1", false), "slow")
	pending := []*apiv1.Pod{marked, otherMarked, fastNew, fastBlank, fastError, fastDeleting, slowNew}

	for _, tc := range []struct {
		name string
		u    UnschedulablePods
		want []string
	}{
		{"no flags", UnschedulablePods{}, []string{"default-marked", "other-marked"}},
		{"allowed", UnschedulablePods{AllowedSchedulers: []string{"default-scheduler"}}, []string{"default-marked"}},
		{"allowed other", UnschedulablePods{AllowedSchedulers: []string{"other", "fast"}}, []string{"other-marked"}},
		{"bypassed", UnschedulablePods{BypassedSchedulers: []string{"fast"}},
			[]string{"default-marked", "other-marked", "fast-new", "fast-blank-reason"}},
		{"allowed and bypassed", UnschedulablePods{AllowedSchedulers: []string{"fast"}, BypassedSchedulers: []string{"fast"}},
			[]string{"fast-new", "fast-blank-reason"}},
	} {
		var got []string
		for _, p := range tc.u.ProcessPods(context.Background(), &Loop{PendingPods: pending}, pending) {
			got = append(got, p.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// --pod-injection-limit caps the pods returned when stand-ins are added;
// when the real pods reach it, none are added and none dropped.
func TestPodInjectionLimit(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	replicas := int32(100)
	_ = indexer.Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "a"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}})
	var pending []*apiv1.Pod
	for i := 0; i < 4; i++ {
		pending = append(pending, burstPod(fmt.Sprintf("a-%d", i), "a", "1", true))
	}
	for _, tc := range []struct{ limit, want int }{{5000, 100}, {10, 10}, {4, 4}, {2, 4}, {0, 4}} {
		u := UnschedulablePods{ReplicaSets: appslisters.NewReplicaSetLister(indexer), InjectionLimit: tc.limit}
		if got := len(u.ProcessPods(context.Background(), &Loop{PendingPods: pending}, pending)); got != tc.want {
			t.Errorf("limit %d: %d pods, want %d", tc.limit, got, tc.want)
		}
	}
}

// A new pod of a ReplicaSet leaves an open batch alone only when the loop
// will count all of that ReplicaSet's replicas still to create.
func TestCountsWholeReplicaSet(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	small, big := int32(500), int32(10000)
	_ = indexer.Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "a"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &small}})
	_ = indexer.Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "b", UID: "b"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &big}})
	_ = indexer.Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", UID: "c",
		DeletionTimestamp: &metav1.Time{}}, Spec: appsv1.ReplicaSetSpec{Replicas: &small}})
	_ = indexer.Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e", UID: "e"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &small}, Status: appsv1.ReplicaSetStatus{Conditions: []appsv1.ReplicaSetCondition{
			{Type: appsv1.ReplicaSetReplicaFailure, Status: apiv1.ConditionTrue, Reason: "FailedCreate"}}}})
	lister := appslisters.NewReplicaSetLister(indexer)
	recreated := burstPod("a-1", "a", "1", false)
	recreated.OwnerReferences[0].UID = "an-older-a"
	job := burstPod("j-0", "", "1", false)
	yes := true
	job.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "j", UID: "j", Controller: &yes}}
	for _, tc := range []struct {
		name  string
		pod   *apiv1.Pod
		limit int
		want  bool
	}{
		{"replicas within the limit", burstPod("a-0", "a", "1", false), 5000, true},
		{"replicas above the limit", burstPod("b-0", "b", "1", false), 5000, false},
		{"the limit raised", burstPod("b-0", "b", "1", false), 20000, true},
		{"above the limit, counted in pieces", burstPod("b-0", "b", "1", false), 5000, true},
		{"no stand-ins at all", burstPod("a-0", "a", "1", false), 0, false},
		{"ReplicaSet being deleted", burstPod("c-0", "c", "1", false), 5000, false},
		{"replicas refused, counted in pieces", burstPod("e-0", "e", "1", false), 5000, false},
		{"ReplicaSet not known", burstPod("d-0", "d", "1", false), 5000, false},
		{"another ReplicaSet of the same name", recreated, 5000, false},
		{"a Job's pod", job, 5000, false},
		{"a bare pod", burstPod("p", "", "1", false), 5000, false},
	} {
		inPieces := strings.HasSuffix(tc.name, "in pieces")
		if got := CountsWholeReplicaSet(lister, tc.pod, tc.limit, inPieces); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if CountsWholeReplicaSet(nil, burstPod("a-0", "a", "1", false), 5000, true) {
		t.Error("counted without a lister")
	}
}
