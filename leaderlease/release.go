package leaderlease

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// Released says what Release did.
type Released int

const (
	// Cleared: the Lease was this replica's and is free now.
	Cleared Released = iota
	// NotHeld: the Lease is another replica's, free already, or gone;
	// nothing was written.
	NotHeld
)

// Release clears the holder of the Lease behind lock when it is still
// identity, re-reading it after every conflict, for at most timeout. The
// lock must not be in use by an elector any more. The cleared record keeps
// the leader transitions and asks for a lease of one second, as client-go's
// own release does, so that a waiting replica takes over at once.
func Release(ctx context.Context, lock resourcelock.Interface, identity string, timeout time.Duration,
	clk clock.PassiveClock) (Released, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	result := NotHeld
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		rec, _, err := lock.Get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			last = err
			return false, nil // retried: the API server may be back soon
		case rec.HolderIdentity != identity:
			return true, nil
		}
		now := metav1.NewTime(clk.Now())
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaderTransitions: rec.LeaderTransitions,
			LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now})
		if err != nil {
			last = err // a conflict: something wrote the Lease after the read; read it again
			return false, nil
		}
		result = Cleared
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last error: %w)", err, last)
		}
		return NotHeld, fmt.Errorf("releasing the Lease %s: %w", lock.Describe(), err)
	}
	return result, nil
}
