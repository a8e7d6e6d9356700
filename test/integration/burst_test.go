package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestStateConflictsDoNotBackOff: while a Deployment's burst is scaled up,
// another writer keeps changing the kwok provider's state ConfigMap, so the
// provider's writes conflict. The provider retries on a fresh read, nothing
// is backed off, and the pods run on exactly the nodes one decision asked
// for. This run does not force a conflict at a given moment (the old
// provider also passed it, its read-to-write window being short); the
// regression tests that do are the kwok provider's
// TestIncreaseSurvivesConcurrentStateWrite and scaleup's
// TestTransientIncreaseErrorIsRetriedNotBackedOff.
func TestStateConflictsDoNotBackOff(t *testing.T) {
	e := framework.New(t)
	dumpPods(e)
	group := framework.UniqueName("burst")
	path := writeKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 30
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 2s}
`, group, framework.TestNamespaceLabel, e.Namespace))
	p := startAutoscaler(t, "autoscaler", scaleUpArgs(e, path)...)
	e.Eventually(30*time.Second, "the autoscaler looping", func(context.Context) (bool, error) {
		return p.log.Contains("Informer caches synced"), nil
	})

	// Two other writers update the state ConfigMap as fast as they can,
	// bumping its resourceVersion under the provider's feet.
	var writes atomic.Int64
	ctx, stop := context.WithCancel(e.Context())
	done := make(chan struct{})
	var writers sync.WaitGroup
	for w := 0; w < 2; w++ {
		writers.Add(1)
		go touchState(ctx, t, e, &writers, &writes, w)
	}
	go func() { writers.Wait(); close(done) }()
	defer func() { stop(); <-done }()

	deployment(e, "burst", 80, map[string]string{"pool": group}) // 1 CPU each: 20 nodes of 4 CPU
	e.Eventually(3*time.Minute, "80 pods Running", func(ctx context.Context) (bool, error) {
		return allRunning(ctx, e, 80)
	})
	stop()
	<-done
	if writes.Load() < 10 {
		t.Fatalf("only %d concurrent writes of the state ConfigMap: the test did not exercise conflicts", writes.Load())
	}
	log := p.log.String()
	if strings.Contains(log, "Node group backed off") {
		t.Errorf("a group was backed off:\n%s", log)
	}
	if n := len(nodeNames(e, group)); n != 20 {
		t.Errorf("%d nodes for 80 one-CPU pods on 4-CPU nodes, want 20", n)
	}
	t.Logf("%d concurrent writes; %d scale-up decisions", writes.Load(), strings.Count(log, "\"Scaled up node group\""))
}

// touchState updates the kwok state ConfigMap's annotations until ctx ends.
func touchState(ctx context.Context, t *testing.T, e *framework.Env, wg *sync.WaitGroup, writes *atomic.Int64, w int) {
	defer wg.Done()
	cms := e.Client.CoreV1().ConfigMaps(e.Namespace)
	for i := 0; ctx.Err() == nil; i++ {
		cm, err := cms.Get(ctx, kwok.StateConfigMap, metav1.GetOptions{})
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[fmt.Sprintf("test/touch-%d", w)] = fmt.Sprint(i)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
			writes.Add(1)
		} else if !apierrors.IsConflict(err) && ctx.Err() == nil {
			t.Logf("touching the state ConfigMap: %v", err)
		}
	}
}

// TestReplicaSetAboveInjectionLimitInPieces: a ReplicaSet of 100 replicas
// with --pod-injection-limit=40, whose pods appear slower than the loops
// decide (the test creates them itself: the ReplicaSet's own template is
// refused by the API server, so its controller adds none). The first loop
// counts its 10 pods and 30 stand-ins (10 nodes: room for replicas 0-39);
// that loop was productive, so the next one runs at once, holds that room
// for replicas 0-39 and counts replicas 40-69 ahead, and the one after
// 70-99: the whole ReplicaSet in three scale-ups of at most 40 pods each,
// 25 nodes, while only 10 of its pods exist. Counted in a window that
// slides (the same 10 pods and 30 stand-ins, all within the room already
// made), the second loop would add nothing, and every later piece would
// wait for pods to exist and be marked. More pods appearing later add
// nothing either: their room is held.
func TestReplicaSetAboveInjectionLimitInPieces(t *testing.T) {
	e := framework.New(t)
	dumpPods(e)
	group := framework.UniqueName("pieces")
	path := writeKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 60
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 60s}
`, group, framework.TestNamespaceLabel, e.Namespace))
	p := startAutoscaler(t, "autoscaler", "--kubeconfig="+e.Kubeconfig, "--namespace="+e.Namespace,
		"--cloud-provider=kwok", "--cloud-config="+path, "--v=2", "--pod-injection-limit=40")
	e.Eventually(30*time.Second, "the autoscaler looping", func(context.Context) (bool, error) {
		return p.log.Contains("Informer caches synced"), nil
	})

	replicas := int32(100)
	labels := map[string]string{"app": "pieces"}
	spec := apiv1.PodSpec{NodeSelector: map[string]string{"pool": group},
		Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
				apiv1.ResourceMemory: resource.MustParse("1Gi")}}}}}
	refused := *spec.DeepCopy()
	refused.PriorityClassName = "no-such-priority-class" // the controller's own pods are refused
	rs, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Create(e.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pieces", Namespace: e.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: refused}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	createReplicas := func(from, n int) {
		for i := from; i < from+n; i++ {
			pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pieces-%d", i), Namespace: e.Namespace,
				Labels: labels, OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
					Name: rs.Name, UID: rs.UID, Controller: &yes}}}, Spec: *spec.DeepCopy()}
			if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	createReplicas(0, 10)
	e.Eventually(60*time.Second, "scale-ups to 25 nodes, room for all 100 replicas", func(context.Context) (bool, error) {
		return p.log.Contains(fmt.Sprintf("nodeGroup=%q from=", group)) && p.log.Contains(" to=25 max=60"), nil
	})
	createReplicas(10, 10) // marked while the nodes register: their room is held
	e.Eventually(30*time.Second, "the 10 new pods marked and a loop run for them", func(context.Context) (bool, error) {
		return strings.Count(p.log.String(), "\"Loop for a batch of unschedulable pods\"") >= 2, nil
	})
	time.Sleep(2 * time.Second)
	log := p.log.String()
	if n := strings.Count(log, "\"Scaled up node group\""); n > 3 {
		t.Errorf("%d scale-ups, want at most 3 (pieces of at most 40 pods for 100 replicas)", n)
	}
	if strings.Contains(log, " to=26 ") || strings.Count(log, " to=25 max=60") != 1 {
		t.Errorf("the group did not end at 25 nodes for 100 one-CPU replicas on 4-CPU nodes")
	}
	if strings.Contains(log, "Node group backed off") {
		t.Errorf("a group was backed off")
	}
}
