package lifecycle

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/leaderlease"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// renewalInFlight is a lock whose next Update is beaten by a renewal of the
// same holder that the API server applies after the caller read the Lease:
// what a renewal cancelled on the client side, but already sent, does.
type renewalInFlight struct {
	resourcelock.Interface
	e     *framework.Env
	name  string
	armed bool
}

func (l *renewalInFlight) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if l.armed {
		l.armed = false
		cur, err := l.e.Client.CoordinationV1().Leases(l.e.Namespace).Get(ctx, l.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		cur.Spec.RenewTime = &now
		if _, err := l.e.Client.CoordinationV1().Leases(l.e.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return l.Interface.Update(ctx, rec)
}

func heldLease(t *testing.T, e *framework.Env, name, identity string) *renewalInFlight {
	t.Helper()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.Namespace, name, e.Client.CoreV1(), e.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	if err := lock.Create(e.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: identity, LeaseDurationSeconds: 3600,
		AcquireTime: now, RenewTime: now, LeaderTransitions: 3}); err != nil {
		t.Fatal(err)
	}
	return &renewalInFlight{Interface: lock, e: e, name: name, armed: true}
}

func holder(t *testing.T, e *framework.Env, name string) string {
	t.Helper()
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestLeaseReleaseSurvivesARenewalInFlight: a renewal that lands between the
// release's read and its write makes a one-shot release (client-go's: read,
// then update) fail with a conflict and leave the Lease held, which is how
// TestStartupErrorReleasesTheLease once failed; leaderlease.Release reads it
// again and clears the holder. A Lease another replica holds is left alone.
func TestLeaseReleaseSurvivesARenewalInFlight(t *testing.T) {
	e := framework.New(t)
	t.Run("one-shot release loses the race", func(t *testing.T) {
		lock := heldLease(t, e, "one-shot", "me")
		rec, _, err := lock.Get(e.Context())
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		err = lock.Update(e.Context(), resourcelock.LeaderElectionRecord{LeaderTransitions: rec.LeaderTransitions,
			LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now})
		if !apierrors.IsConflict(err) {
			t.Fatalf("one-shot release: err %v, want a conflict (the interleaving of the race)", err)
		}
		if h := holder(t, e, "one-shot"); h != "me" {
			t.Fatalf("holder %q, want the Lease still held", h)
		}
	})
	t.Run("Release clears it", func(t *testing.T) {
		lock := heldLease(t, e, "retried", "me")
		got, err := leaderlease.Release(e.Context(), lock, "me", 10*time.Second, clock.RealClock{})
		if err != nil || got != leaderlease.Cleared {
			t.Fatalf("Release: %v, %v; want Cleared", got, err)
		}
		if h := holder(t, e, "retried"); h != "" {
			t.Errorf("holder %q after Release, want none", h)
		}
		l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Context(), "retried", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 3 {
			t.Errorf("leader transitions %v, want 3 kept", l.Spec.LeaseTransitions)
		}
	})
	t.Run("another holder is left alone", func(t *testing.T) {
		lock := heldLease(t, e, "theirs", "them")
		got, err := leaderlease.Release(e.Context(), lock, "me", 10*time.Second, clock.RealClock{})
		if err != nil || got != leaderlease.NotHeld {
			t.Fatalf("Release: %v, %v; want NotHeld", got, err)
		}
		if h := holder(t, e, "theirs"); h != "them" {
			t.Errorf("holder %q, want them", h)
		}
	})
}
