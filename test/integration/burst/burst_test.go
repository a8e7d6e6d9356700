package burst

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
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
	itest.DumpPods(e)
	group, path := burstGroup(e, "burst", 30, "2s")
	p := startLooping(t, e, itest.ScaleUpArgs(e, path)...)

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

	itest.Deployment(e, "burst", 80, map[string]string{"pool": group}) // 1 CPU each: 20 nodes of 4 CPU
	e.Eventually(3*time.Minute, "80 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 80)
	})
	stop()
	<-done
	if writes.Load() < 10 {
		t.Fatalf("only %d concurrent writes of the state ConfigMap: the test did not exercise conflicts", writes.Load())
	}
	log := p.Log.String()
	if strings.Contains(log, "Node group backed off") {
		t.Errorf("a group was backed off:\n%s", log)
	}
	if n := len(itest.NodeNames(e, group)); n != 20 {
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
// with --pod-injection-limit=40, whose pods its controller creates slower
// than the loops decide (a webhook holds each creation until the test
// releases it, as a burst of thousands arrives over minutes). With 10 pods
// the first loop counts 30 stand-ins (10 nodes: room for replicas 0-39);
// the next loops hold that room and count no further piece while fewer
// pods exist than half of it. Once 20 exist, a loop holds the room for
// replicas 0-39 not marked and counts replicas 40-59 ahead (15 nodes),
// where a window sliding with the pods (20 pods and 20 stand-ins, all
// within the room already made) would add nothing. When all 100 exist
// they are counted as pods: 25 nodes in all, none of the scale-ups twice
// for the same replicas (the last 80 may arrive over more than one loop).
func TestReplicaSetAboveInjectionLimitInPieces(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	group, path := burstGroup(e, "pieces", 60, "90s")
	gate := newReplicaGate(e, "pieces")
	p := startLooping(t, e, "--kubeconfig="+e.Kubeconfig, "--namespace="+e.Namespace,
		"--cloud-provider=kwok", "--kwok-provider-enabled", "--cloud-config="+path, "--v=2", "--pod-injection-limit=40", "--scan-interval=2s")
	settled := func(want int) { t.Helper(); settledAt(e, p, group, want) }
	existing := func(n int) {
		t.Helper()
		gate.release(n)
		want := gate.released
		e.Eventually(60*time.Second, fmt.Sprintf("%d pods of the ReplicaSet", want), func(ctx context.Context) (bool, error) {
			got, err := activePodsOf(ctx, e, "pieces")
			return got == want, err
		})
	}

	createReplicaSet(e, "pieces", 100, oneCPUPodSpec(group))
	existing(10)
	e.Eventually(60*time.Second, "a scale-up to 10 nodes: room for replicas 0-39", func(context.Context) (bool, error) {
		return largestTarget(p.Log.String(), group) >= 10, nil
	})
	settled(10) // 10 pods of the 40 planned: no further piece
	existing(10)
	e.Eventually(60*time.Second, "a scale-up to 15 nodes: room for replicas 40-59", func(context.Context) (bool, error) {
		return largestTarget(p.Log.String(), group) >= 15, nil
	})
	settled(15) // 20 pods of the 60 planned: no further piece
	if n := strings.Count(p.Log.String(), "\"Scaled up node group\""); n != 2 {
		t.Errorf("%d scale-ups for the first 20 pods, want 2 (pieces for replicas 0-39 and 40-59)", n)
	}
	existing(80)
	e.Eventually(60*time.Second, "a scale-up to 25 nodes: room for all 100 replicas", func(context.Context) (bool, error) {
		return largestTarget(p.Log.String(), group) >= 25, nil
	})
	settled(25)
	log := p.Log.String()
	// The last 80 creations may reach the loops over one loop or several
	// (the ReplicaSet controller creates in growing batches): each later
	// scale-up must start where the one before ended (none for replicas
	// already given room), and none go past 25 (settled checked the end).
	last := -1
	for _, m := range scaledUpFromTo.FindAllStringSubmatch(log, -1) {
		t.Log(m[0])
		from, _ := strconv.Atoi(m[1])
		to, _ := strconv.Atoi(m[2])
		if last >= 0 && from != last {
			t.Errorf("a scale-up from %d after one to %d: room made twice or lost", from, last)
		}
		last = to
	}
	if strings.Contains(log, "Node group backed off") {
		t.Errorf("a group was backed off")
	}
	rs, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Get(e.Context(), "pieces", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			t.Errorf("the ReplicaSet's creations failed (%s: %s): the gate did not only delay them", c.Reason, c.Message)
		}
	}
}
