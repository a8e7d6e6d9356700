package scaleup

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
)

// MaxIncreaseAttempts bounds the calls of one size increase that fail with a
// transient error (cloudprovider.IsTransient): a write conflict, throttling,
// a timeout. Each call asks only for what the earlier ones did not add.
const MaxIncreaseAttempts = 3

// growth is what one size increase did, whatever the provider answered.
type growth struct {
	// Added is how many instances the group's target grew by; it counts
	// an increase that took effect although the call returned an error.
	Added int
	// Err is the last error when not all of the increase took effect.
	Err error
	// Transient says Err is no verdict on the group: it is not backed off.
	Transient bool
	// Retries counts the calls repeated after a transient error.
	Retries int
	// Unknown is how many instances beyond Added a failed call may have
	// added all the same: the target size could not be read after it, so
	// whether it took effect is not known. Such a call is never repeated.
	Unknown int
}

// targetReads bounds the reads of the target size after a failed increase
// call: without one, the call's outcome is unknown.
const targetReads = 3

// grow asks ng for delta more instances (all or none of them when atomic,
// through AtomicIncreaseSize where the provider has it) and finds out what
// took effect: after an error it reads the target size again, so that
// instances the cloud created all the same are accounted for exactly once
// and are not asked for a second time. A transient error is retried up to
// MaxIncreaseAttempts calls in all; an atomic increase that took effect in
// part is not retried (the caller rolls it back). Nothing is asked while
// the target size cannot be read before the call, and a failed call after
// which it cannot be read ends the increase with its outcome unknown
// (growth.Unknown): asking again might double it.
func grow(ctx context.Context, ng cloudprovider.NodeGroup, delta int, atomic bool) growth {
	logger := klog.FromContext(ctx)
	var g growth
	for attempt := 1; ; attempt++ {
		want := delta - g.Added
		before, beforeErr := ng.TargetSize(ctx)
		if beforeErr != nil {
			g.Err = fmt.Errorf("reading the target size before increasing it: %w", beforeErr)
			g.Transient = cloudprovider.IsTransient(beforeErr)
			if !g.Transient || attempt >= MaxIncreaseAttempts || ctx.Err() != nil {
				return g
			}
			g.Retries++
			continue
		}
		err := increaseOnce(ctx, ng, want, atomic)
		if err == nil {
			g.Added += want
			g.Err = nil
			if g.Retries > 0 {
				logger.Info("Node group increase succeeded after transient errors", "nodeGroup", ng.Id(),
					"retries", g.Retries)
			}
			return g
		}
		after, afterErr := readTarget(ctx, ng)
		if afterErr != nil {
			g.Unknown = want
			g.Err = fmt.Errorf("%w; whether it took effect is unknown: %w", err, afterErr)
			g.Transient = cloudprovider.IsTransient(err)
			logger.Error(g.Err, "Node group increase failed and the target size cannot be read; not asking again",
				"nodeGroup", ng.Id(), "asked", want)
			return g
		}
		took := 0
		if after > before {
			took = min(after-before, want)
		}
		g.Added += took
		g.Err = err
		g.Transient = cloudprovider.IsTransient(err)
		if g.Added == delta {
			logger.Error(err, "Node group increase reported an error but took effect; counted as made",
				"nodeGroup", ng.Id(), "delta", delta)
			g.Err = nil
			return g
		}
		if !g.Transient || attempt >= MaxIncreaseAttempts || ctx.Err() != nil || (atomic && took > 0) {
			return g
		}
		g.Retries++
		logger.V(2).Info("Transient error increasing a node group; asking again", "nodeGroup", ng.Id(),
			"asked", want, "took", took, "attempt", attempt, "err", err)
	}
}

// readTarget reads the group's target size, up to targetReads times.
func readTarget(ctx context.Context, ng cloudprovider.NodeGroup) (int, error) {
	var err error
	for range targetReads {
		var n int
		if n, err = ng.TargetSize(ctx); err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return 0, err
}

func increaseOnce(ctx context.Context, ng cloudprovider.NodeGroup, delta int, atomic bool) error {
	if atomic {
		err := ng.AtomicIncreaseSize(ctx, delta)
		if !errors.Is(err, cloudprovider.ErrNotImplemented) {
			return err
		}
	}
	return ng.IncreaseSize(ctx, delta)
}

// failed records an increase that did not (all) take effect: a provider's
// verdict (no capacity, a quota, anything not transient) backs the group off
// with the provider's error code; a transient error only keeps the group out
// of the rest of this loop's decisions, and the next loop asks again.
func (s *Session) failed(ctx context.Context, gs *groupState, g growth) {
	if g.Transient {
		gs.skip = "scale-up failed with a transient error; retried next loop"
		return
	}
	code := "cloudProviderError"
	var su *cloudprovider.ScaleUpError
	if errors.As(g.Err, &su) && su.Code != "" {
		code = su.Code
	}
	s.o.state.RegisterFailedScaleUp(ctx, gs.group.Id(), clusterstate.BackoffReason{ErrorCode: code,
		ErrorMessage: g.Err.Error()}, s.in.Now)
	gs.skip = "scale-up execution failed"
}

// IncreaseError is a failed increase as Result.Errors reports it.
type IncreaseError struct {
	NodeGroup string
	Delta     int
	// Transient says the group was not backed off (see MaxIncreaseAttempts).
	Transient bool
	Err       error
}

func (e *IncreaseError) Error() string {
	return fmt.Sprintf("increasing node group %q by %d: %v", e.NodeGroup, e.Delta, e.Err)
}

func (e *IncreaseError) Unwrap() error { return e.Err }
