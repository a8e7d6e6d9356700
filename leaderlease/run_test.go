package leaderlease

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// TestRunReleasesTheLeaseAfterAnError: an act that fails returns its error
// (not ErrLost) and leaves the Lease free for the next replica.
func TestRunReleasesTheLeaseAfterAnError(t *testing.T) {
	client := fake.NewClientset()
	cfg := Config{Namespace: "ns", Name: "lease", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second,
		RetryPeriod: 100 * time.Millisecond}
	failure := errors.New("start-up failed")
	acted := false
	err := Run(t.Context(), cfg, client, record.NewBroadcaster(), func(ctx context.Context) error {
		acted = true
		lease, err := client.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Errorf("while acting, the Lease is %v (%v); want it held", lease, err)
		}
		return failure
	})
	if !acted || !errors.Is(err, failure) || errors.Is(err, ErrLost) {
		t.Fatalf("Run = %v (acted %v); want the act's error", err, acted)
	}
	lease, err := client.CoordinationV1().Leases("ns").Get(t.Context(), "lease", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("after Run the Lease is held by %q; want it released", *h)
	}
}

// TestRunEndsWithTheContext: a replica whose context ends while acting
// returns nil, not ErrLost.
func TestRunEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cfg := Config{Namespace: "ns", Name: "lease", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second,
		RetryPeriod: 100 * time.Millisecond}
	err := Run(ctx, cfg, fake.NewClientset(), record.NewBroadcaster(), func(leadCtx context.Context) error {
		cancel()
		<-leadCtx.Done()
		return nil
	})
	if err != nil {
		t.Fatalf("Run = %v; want nil after the context ended", err)
	}
}
