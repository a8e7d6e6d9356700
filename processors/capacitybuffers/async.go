package capacitybuffers

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// AsyncWriter applies buffers' statuses off the loop, as upstream writes
// readyReplicas: ApplyStatus only records the buffer's latest status (one
// not applied yet is replaced) and queues the buffer; Run's workers apply
// them. So the loop never waits on the API server or on its client's rate
// limiter, however many buffers change at once. A failed apply is logged
// and not retried: the next loop, reading the old value from the cache,
// asks again.
type AsyncWriter struct {
	w       StatusWriter
	mu      sync.Mutex
	pending map[types.NamespacedName]v1.CapacityBufferStatus
	queue   workqueue.TypedInterface[types.NamespacedName]
}

// NewAsyncWriter applies through w once Run runs.
func NewAsyncWriter(w StatusWriter) *AsyncWriter {
	return &AsyncWriter{w: w, pending: map[types.NamespacedName]v1.CapacityBufferStatus{},
		queue: workqueue.NewTyped[types.NamespacedName]()}
}

// ApplyStatus implements StatusWriter: status is queued, never applied
// here; the error is always nil.
func (a *AsyncWriter) ApplyStatus(_ context.Context, namespace, name string, status v1.CapacityBufferStatus) error {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	a.mu.Lock()
	a.pending[key] = status
	a.mu.Unlock()
	a.queue.Add(key) // a key queued or being applied is queued once more, at most
	return nil
}

// Run applies the queued statuses with workers goroutines until ctx ends,
// and returns once they stopped; what is still queued then is dropped.
func (a *AsyncWriter) Run(ctx context.Context, workers int) {
	stop := context.AfterFunc(ctx, a.queue.ShutDown)
	defer stop()
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for a.applyNext(ctx) {
			}
		})
	}
	wg.Wait()
}

// applyNext applies one queued status; false once the queue is shut down.
func (a *AsyncWriter) applyNext(ctx context.Context) bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	a.mu.Lock()
	status, ok := a.pending[key]
	delete(a.pending, key)
	a.mu.Unlock()
	if !ok {
		return true
	}
	err := a.w.ApplyStatus(ctx, key.Namespace, key.Name, status)
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Applying the status of a CapacityBuffer", "buffer", key)
	}
	return true
}
