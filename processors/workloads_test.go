package processors

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// ownedPod is burstPod owned by a controller of kind named owner.
func ownedPod(name, kind, owner string, marked bool) *apiv1.Pod {
	p := burstPod(name, owner, "1", marked)
	p.OwnerReferences[0].Kind = kind
	return p
}

// workloadLoop is one loop of workload owner of kind: bound pods on a node
// and marked pending pods.
func workloadLoop(now time.Time, kind, owner string, bound, pending int) (*Loop, []*apiv1.Pod) {
	loop := &Loop{Now: now}
	for i := 0; i < bound; i++ {
		p := ownedPod(fmt.Sprintf("%s-%d", owner, i), kind, owner, false)
		p.Spec.NodeName = "n"
		loop.ScheduledPods = append(loop.ScheduledPods, p)
	}
	for i := bound; i < bound+pending; i++ {
		loop.PendingPods = append(loop.PendingPods, ownedPod(fmt.Sprintf("%s-%d", owner, i), kind, owner, true))
	}
	return loop, loop.PendingPods
}

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, PodManagementPolicy: appsv1.OrderedReadyPodManagement}}
}

func ptrTo[T any](v T) *T { return &v }

func job(name string, parallelism, completions *int32) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec: batchv1.JobSpec{Parallelism: parallelism, Completions: completions,
			CompletionMode: ptrTo(batchv1.IndexedCompletion)}}
}

// An OrderedReady StatefulSet of 64 replicas whose first pod is
// unschedulable: its 63 replicas still to create are counted with it. One
// with volumeClaimTemplates gets none (each replica's own claims do not
// exist yet), nor does one the lister does not know under that UID.
func TestUpcomingReplicasOfAStatefulSet(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	u := UnschedulablePods{StatefulSets: appslisters.NewStatefulSetLister(indexer), InjectionLimit: 5000}
	ctx := context.Background()
	count := func() int {
		loop, pending := workloadLoop(time.Now(), "StatefulSet", "db", 0, 1)
		return len(u.upcomingReplicas(ctx, pending, loop))
	}
	_ = indexer.Add(statefulSet("db", 64))
	if got := count(); got != 63 {
		t.Fatalf("%d stand-ins for a StatefulSet of 64 with one pod, want 63", got)
	}
	loop, pending := workloadLoop(time.Now(), "StatefulSet", "db", 10, 1)
	up := u.upcomingReplicas(ctx, pending, loop)
	if len(up) != 53 {
		t.Errorf("%d stand-ins with 11 pods of 64, want 53", len(up))
	}
	for _, p := range up {
		if !IsUpcomingReplica(p) || p.Spec.NodeName != "" {
			t.Errorf("stand-in %s is not an upcoming replica", p.Name)
		}
	}
	withClaims := statefulSet("db", 64)
	withClaims.Spec.VolumeClaimTemplates = []apiv1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	_ = indexer.Update(withClaims)
	if got := count(); got != 0 {
		t.Errorf("%d stand-ins for a StatefulSet with volumeClaimTemplates, want 0", got)
	}
	other := statefulSet("db", 64)
	other.UID = "another"
	_ = indexer.Update(other)
	if got := count(); got != 0 {
		t.Errorf("%d stand-ins for a pod whose StatefulSet was replaced, want 0", got)
	}
	// Without the lister (proactive scale-up off for them) nothing is counted.
	_ = indexer.Update(statefulSet("db", 64))
	u.StatefulSets = nil
	if got := count(); got != 0 {
		t.Errorf("%d stand-ins without a StatefulSet lister, want 0", got)
	}
}

// A Job's pods still to create are min(parallelism, completions -
// succeeded) minus its active pods; none for a suspended or finishing Job,
// one past its deadline, one whose pods failed, or a work queue one of whose
// pods succeeded.
func TestUpcomingPodsOfAJob(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		edit   func(j *batchv1.Job)
		bound  int
		want   int
		limit  int
		marked int
	}{
		{name: "parallelism 64 of 100, one pod", want: 63},
		{name: "8 bound, 2 marked", bound: 8, marked: 2, want: 54},
		{name: "completions left below parallelism", edit: func(j *batchv1.Job) { j.Status.Succeeded = 80 }, want: 19},
		{name: "all succeeded", edit: func(j *batchv1.Job) { j.Status.Succeeded = 100 }, want: 0},
		{name: "parallelism unset", edit: func(j *batchv1.Job) { j.Spec.Parallelism = nil }, want: 0},
		{name: "work queue", edit: func(j *batchv1.Job) { j.Spec.Completions = nil }, want: 63},
		{name: "work queue with a pod succeeded", edit: func(j *batchv1.Job) {
			j.Spec.Completions, j.Status.Succeeded = nil, 1
		}, want: 0},
		{name: "injection limit", limit: 20, want: 19},
		{name: "suspended", edit: func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) }, want: 0},
		{name: "failed", edit: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: apiv1.ConditionTrue}}
		}, want: 0},
		{name: "failure target", edit: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: apiv1.ConditionTrue}}
		}, want: 0},
		{name: "a condition not true", edit: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: apiv1.ConditionFalse}}
		}, want: 63},
		{name: "pods failed", edit: func(j *batchv1.Job) { j.Status.Failed = 1 }, want: 0},
		{name: "past its deadline", edit: func(j *batchv1.Job) {
			j.Spec.ActiveDeadlineSeconds = ptrTo(int64(60))
			j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
		}, want: 0},
		{name: "before its deadline", edit: func(j *batchv1.Job) {
			j.Spec.ActiveDeadlineSeconds = ptrTo(int64(60))
			j.Status.StartTime = &metav1.Time{Time: now.Add(-59 * time.Second)}
		}, want: 63},
	} {
		t.Run(tc.name, func(t *testing.T) {
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			j := job("train", ptrTo(int32(64)), ptrTo(int32(100)))
			if tc.edit != nil {
				tc.edit(j)
			}
			_ = indexer.Add(j)
			limit := 5000
			if tc.limit > 0 {
				limit = tc.limit
			}
			u := UnschedulablePods{Jobs: batchlisters.NewJobLister(indexer), InjectionLimit: limit}
			marked := max(tc.marked, 1)
			loop, pending := workloadLoop(now, "Job", "train", tc.bound, marked)
			if got := len(u.upcomingReplicas(ctx, pending, loop)); got != tc.want {
				t.Errorf("%d stand-ins, want %d", got, tc.want)
			}
		})
	}
}

// Pods that succeeded or failed are not active: a Job's finished pods make
// room for the pods that replace them, as its controller counts them.
func TestTerminalPodsAreNotActive(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = indexer.Add(job("train", ptrTo(int32(8)), ptrTo(int32(100))))
	u := UnschedulablePods{Jobs: batchlisters.NewJobLister(indexer), InjectionLimit: 5000}
	loop, pending := workloadLoop(time.Now(), "Job", "train", 4, 1)
	loop.ScheduledPods[0].Status.Phase = apiv1.PodSucceeded
	loop.ScheduledPods[1].Status.Phase = apiv1.PodFailed
	if got := len(u.upcomingReplicas(context.Background(), pending, loop)); got != 5 { // 8 - 3 active
		t.Errorf("%d stand-ins, want 5", got)
	}
}

// An OrderedReady StatefulSet of 64 creates its pods one at a time, each
// once the previous one is Ready: the first decision counts all 63 still to
// create, and the plan holds that room in the next loops as they arrive,
// with no further stand-ins and no further scale-up; the plan ends once all
// are bound. A Job likewise.
func TestPlansHoldRoomForPodsCreatedOneAtATime(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := scaleup.Result{Remaining: map[*apiv1.Pod]string{}}
	for _, kind := range []string{"StatefulSet", "Job"} {
		t.Run(kind, func(t *testing.T) {
			plans := NewReplicaPlans(15 * time.Minute)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			u := UnschedulablePods{InjectionLimit: 5000, Plans: plans}
			if kind == "StatefulSet" {
				_ = indexer.Add(statefulSet("w", 64))
				u.StatefulSets = appslisters.NewStatefulSetLister(indexer)
			} else {
				_ = indexer.Add(job("w", ptrTo(int32(64)), ptrTo(int32(64))))
				u.Jobs = batchlisters.NewJobLister(indexer)
			}
			loop, pending := workloadLoop(t0, kind, "w", 0, 1)
			pods := u.ProcessPods(ctx, loop, pending)
			if len(pods) != 64 {
				t.Fatalf("first loop: %d pods, want 64", len(pods))
			}
			plans.ScaleUpDone(ctx, loop, ScaleUpStatus{Pods: pods, Result: ok})
			if got := plans.planned("w"); got != 64 {
				t.Fatalf("the plan covers %d pods, want 64", got)
			}
			// The pods come one at a time, each bound to the room made.
			for bound := 1; bound < 64; bound += 9 {
				loop, pending = workloadLoop(t0.Add(time.Duration(bound)*time.Second), kind, "w", bound, 1)
				pods = u.ProcessPods(ctx, loop, pending)
				if len(pods) != 1 || booked(plans) != 64-bound-1 {
					t.Errorf("%d bound: %d pods, %d booked; want 1, %d", bound, len(pods), booked(plans), 64-bound-1)
				}
				plans.ScaleUpDone(ctx, loop, ScaleUpStatus{Pods: pods, Result: ok})
			}
			loop, pending = workloadLoop(t0.Add(time.Minute), kind, "w", 64, 0)
			u.ProcessPods(ctx, loop, pending)
			if got := plans.planned("w"); got != 0 {
				t.Errorf("with all 64 bound the plan still covers %d", got)
			}
		})
	}
}

// A StatefulSet or Job whose creations are refused without a condition
// saying so (a quota: the controllers report it in events only) gets one
// piece of --pod-injection-limit ahead of the pods that exist, and no
// further piece however many loops run, as a ReplicaSet.
func TestRefusedCreationsAreBoundedByWhatArrives(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := scaleup.Result{Remaining: map[*apiv1.Pod]string{}}
	for _, kind := range []string{"StatefulSet", "Job"} {
		t.Run(kind, func(t *testing.T) {
			plans := NewReplicaPlans(15 * time.Minute)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			u := UnschedulablePods{InjectionLimit: 40, Plans: plans}
			if kind == "StatefulSet" {
				_ = indexer.Add(statefulSet("w", 1000000))
				u.StatefulSets = appslisters.NewStatefulSetLister(indexer)
			} else {
				_ = indexer.Add(job("w", ptrTo(int32(1000000)), ptrTo(int32(1000000))))
				u.Jobs = batchlisters.NewJobLister(indexer)
			}
			most := 0
			for i := 0; i < 10; i++ { // the quota admits 10 pods; they stay pending, then are bound
				bound := min(i, 10)
				loop, pending := workloadLoop(t0.Add(time.Duration(i)*10*time.Second), kind, "w", bound, 10-bound)
				pods := u.ProcessPods(ctx, loop, pending)
				plans.ScaleUpDone(ctx, loop, ScaleUpStatus{Pods: pods, Result: ok})
				most = max(most, plans.planned("w"))
			}
			if most != 40 {
				t.Errorf("the plan reached %d pods for a workload of which 10 exist, want 40 (one piece)", most)
			}
		})
	}
}
