package scaledown

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

func TestTaintLatencyKeepsTheLongestOfTheLastHour(t *testing.T) {
	tl := &taintLatency{}
	if _, ok := tl.delay(t0); ok {
		t.Fatal("no sample yet: want ok=false")
	}
	tl.add(t0, time.Second)
	tl.add(t0.Add(30*time.Minute), 200*time.Millisecond)
	if d, ok := tl.delay(t0.Add(45 * time.Minute)); !ok || d != 2*time.Second {
		t.Fatalf("45 min later: got %v %v, want 2s (twice the 1 s sample)", d, ok)
	}
	if d, ok := tl.delay(t0.Add(61 * time.Minute)); !ok || d != 400*time.Millisecond {
		t.Fatalf("61 min later the 1 s sample has expired: got %v %v, want 400ms", d, ok)
	}
	if _, ok := tl.delay(t0.Add(2 * time.Hour)); ok {
		t.Fatal("two hours later every sample has expired")
	}
}

func taintedNode(name string, tainted bool) *apiv1.Node {
	n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if tainted {
		n.Spec.Taints = []apiv1.Taint{{Key: ToBeDeletedTaint, Effect: apiv1.TaintEffectNoSchedule}}
	}
	return n
}

func dynamicActuator(t *testing.T, fixed time.Duration) (*Actuator, cache.Indexer) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	o := DefaultOptions()
	o.NodeDeleteDelayAfterTaint = fixed
	a := NewActuator(o, nil, nil, nil, nopMetrics{}, clock.RealClock{}, WithDynamicDeleteDelay(corelisters.NewNodeLister(idx)))
	a.latency.timeout = 300 * time.Millisecond
	return a, idx
}

// The pause follows how long the informer took to show the taints, not the
// fixed delay; a node the informer never shows in time falls back to it.
func TestDynamicDeleteDelayFollowsTheInformer(t *testing.T) {
	a, idx := dynamicActuator(t, 5*time.Second)
	ctx := context.Background()

	// Seen at once: a pause of a few milliseconds, far below the fixed 5 s.
	if err := idx.Add(taintedNode("fast", true)); err != nil {
		t.Fatal(err)
	}
	if d := a.deleteDelay(ctx, map[string]time.Time{"fast": time.Now()}); d >= time.Second {
		t.Fatalf("taint seen at once: delay %v, want well under the fixed 5s", d)
	}

	// Seen 150 ms after the write: at least twice that from now on.
	if err := idx.Add(taintedNode("slow", false)); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		_ = idx.Update(taintedNode("slow", true))
	}()
	d := a.deleteDelay(ctx, map[string]time.Time{"slow": time.Now()})
	if d < 300*time.Millisecond || d >= 5*time.Second {
		t.Fatalf("taint seen after 150ms: delay %v, want at least 300ms and below the fixed delay", d)
	}
	// The longest latency of the hour keeps counting for a later fast job.
	if d2 := a.deleteDelay(ctx, map[string]time.Time{"fast": time.Now()}); d2 < 300*time.Millisecond {
		t.Fatalf("the 150ms latency is within the hour: delay %v, want at least 300ms", d2)
	}

	// Never seen within the timeout: the fixed delay.
	if err := idx.Add(taintedNode("stuck", false)); err != nil {
		t.Fatal(err)
	}
	if d := a.deleteDelay(ctx, map[string]time.Time{"stuck": time.Now()}); d != 5*time.Second {
		t.Fatalf("taint never seen: delay %v, want the fixed 5s", d)
	}
	// A node that is gone does not hold the job.
	if d := a.deleteDelay(ctx, map[string]time.Time{"gone": time.Now()}); d >= 5*time.Second {
		t.Fatalf("node gone: delay %v, want the dynamic one", d)
	}
}

// Without the flag the fixed delay is used whatever the informer does.
func TestFixedDeleteDelayWithoutTheFlag(t *testing.T) {
	o := DefaultOptions()
	o.NodeDeleteDelayAfterTaint = 7 * time.Second
	a := NewActuator(o, nil, nil, nil, nopMetrics{}, clock.RealClock{})
	if d := a.deleteDelay(context.Background(), map[string]time.Time{"x": time.Now()}); d != 7*time.Second {
		t.Fatalf("delay %v, want the fixed 7s", d)
	}
}
