package builder

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// --enable-proactive-scaleup (on by default) counts the replicas a
// ReplicaSet has not created yet with its marked pod; =false counts only
// the pod, and leaves the room planned for replicas out of the loop's
// capacity and status processors.
func TestProactiveScaleUpFlag(t *testing.T) {
	replicas := int32(10)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "web-uid"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}}
	yes := true
	pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0", UID: "web-0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web",
			UID: rs.UID, Controller: &yes}}},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: apiv1.PodStatus{Phase: apiv1.PodPending, Conditions: []apiv1.PodCondition{{Type: apiv1.PodScheduled,
			Status: apiv1.ConditionFalse, Reason: apiv1.PodReasonUnschedulable}}}}
	for _, tc := range []struct {
		args      string
		proactive bool
		wantPods  int
		wantPlans bool
	}{
		{"defaults", config.Defaults().ProactiveScaleupEnabled, 10, true},
		{"--enable-proactive-scaleup=true", true, 10, true},
		{"--enable-proactive-scaleup=false", false, 1, false},
	} {
		opts := config.Defaults()
		opts.ProactiveScaleupEnabled = tc.proactive
		factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
		if err := factory.Apps().V1().ReplicaSets().Informer().GetStore().Add(rs); err != nil {
			t.Fatal(err)
		}
		set := NewProcessors(opts, factory, record.NewFakeRecorder(10), nil, nil)
		got := set.Pods(context.Background(), &processors.Loop{PendingPods: []*apiv1.Pod{pod}})
		if len(got) != tc.wantPods {
			t.Errorf("%v: %d pods counted, want %d", tc.args, len(got), tc.wantPods)
		}
		inCapacity, inStatus := false, false
		for _, p := range set.Capacity {
			_, ok := p.(*processors.ReplicaPlans)
			inCapacity = inCapacity || ok
		}
		for _, p := range set.ScaleUpStatus {
			_, ok := p.(*processors.ReplicaPlans)
			inStatus = inStatus || ok
		}
		if inCapacity != tc.wantPlans || inStatus != tc.wantPlans {
			t.Errorf("%v: ReplicaPlans among the capacity processors %v, the status processors %v; want %v",
				tc.args, inCapacity, inStatus, tc.wantPlans)
		}
	}
}
