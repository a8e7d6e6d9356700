package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
