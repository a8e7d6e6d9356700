package capacitybuffers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// applyLog records applies in order; when gate is set, each apply first
// says it started and waits for gate.
type applyLog struct {
	mu      sync.Mutex
	applied []string
	started chan string
	gate    chan struct{}
}

func (l *applyLog) ApplyStatus(_ context.Context, namespace, name string, st v1.CapacityBufferStatus) error {
	entry := namespace + "/" + name + "=" + string(rune('0'+*st.ReadyReplicas))
	if l.gate != nil {
		l.started <- entry
		<-l.gate
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied = append(l.applied, entry)
	return nil
}

func (l *applyLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.applied...)
}

func ready(n int32) v1.CapacityBufferStatus { return v1.CapacityBufferStatus{ReadyReplicas: ptr.To(n)} }

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestAsyncWriterAppliesTheLatestStatus: ApplyStatus returns at once; a
// buffer's statuses queued before a worker takes it are applied once, the
// latest; one queued while its previous one is being applied is applied
// after it; Run returns once its context ends.
func TestAsyncWriterAppliesTheLatestStatus(t *testing.T) {
	log := &applyLog{started: make(chan string), gate: make(chan struct{})}
	a := NewAsyncWriter(log)
	ctx := context.Background()
	for _, n := range []int32{1, 2, 3} {
		if err := a.ApplyStatus(ctx, "ns", "a", ready(n)); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.ApplyStatus(ctx, "ns", "b", ready(5))

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(runCtx, 1)
	}()
	if got := <-log.started; got != "ns/a=3" {
		t.Fatalf("first apply %s, want ns/a=3 (the latest)", got)
	}
	_ = a.ApplyStatus(ctx, "ns", "a", ready(4)) // while ns/a=3 is being applied
	log.gate <- struct{}{}
	for range 2 {
		<-log.started
		log.gate <- struct{}{}
	}
	waitFor(t, "three applies", func() bool { return len(log.got()) == 3 })
	if diff := cmp.Diff([]string{"ns/a=3", "ns/b=5", "ns/a=4"}, log.got()); diff != "" {
		t.Errorf("applies (-want +got):\n%s", diff)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once its context ended")
	}
}
