package builder

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// TestNewLoopRunsAndUnwinds: a loop wired by NewLoop on an in-memory client
// runs once; the status ConfigMap it writes is removed when the stack
// unwinds after a clean exit and left to the new leader after a lost lease;
// either way the loop's context is over once unwound.
func TestNewLoopRunsAndUnwinds(t *testing.T) {
	for _, lost := range []bool{false, true} {
		opts := config.Defaults()
		client := fake.NewClientset()
		ctx, cancel := context.WithCancel(t.Context())
		stack := &Stack{}
		inf := NewInformers(ctx, client)
		m := metrics.New(prometheus.NewRegistry())
		provider := fakeprovider.NewProvider()
		loop, loopCtx, err := NewLoop(ctx, ctx, Inputs{Opts: opts, Client: client, Metrics: m, Informers: inf,
			Provider: provider, Recorder: record.NewFakeRecorder(100), LeaseLost: func() bool { return lost }}, stack)
		if err != nil {
			t.Fatal(err)
		}
		if loop.ProvReqInformer != nil || loop.Buffers != nil || loop.DRA != nil {
			t.Errorf("defaults wired ProvisioningRequests %v, buffers %v, DRA %v; want none", loop.ProvReqInformer,
				loop.Buffers, loop.DRA)
		}
		if synced, err := SyncInformers(ctx, ctx, stack, cancel, inf.Factory, loop.NamespaceFactory); !synced {
			t.Fatalf("informers did not sync: %v", err)
		}
		a := core.NewAutoscaler(CoreOptions(opts), inf.Listers, provider, m, loop.Options...)
		if _, err := a.RunOnce(loopCtx, time.Now()); err != nil {
			t.Fatalf("loop: %v", err)
		}
		get := func() error {
			_, err := client.CoreV1().ConfigMaps(opts.Namespace).Get(t.Context(), opts.StatusConfigMapName, metav1.GetOptions{})
			return err
		}
		if err := get(); err != nil {
			t.Fatalf("status ConfigMap after a loop: %v", err)
		}
		stack.Unwind()
		if loopCtx.Err() == nil {
			t.Errorf("lease lost %v: the loop's context is live after unwinding", lost)
		}
		err = get()
		switch {
		case lost && err != nil:
			t.Errorf("lease lost: status ConfigMap %v, want it left to the new leader", err)
		case !lost && !apierrors.IsNotFound(err):
			t.Errorf("clean exit: status ConfigMap %v, want it deleted", err)
		}
		cancel()
	}
}
