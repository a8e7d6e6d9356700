package dra

import (
	"context"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// devicesGroup is a kwok group of 8-CPU nodes publishing n devices of
// driver without attributes.
func devicesGroup(name, driver string, n int) itest.KwokGroup {
	return itest.KwokGroup{Name: name, Driver: driver, Models: itest.Repeat("", n)}
}

// waitRunningWithClaims waits, up to timeout, until n pods of the test run
// and n of its ResourceClaims are allocated; what describes it.
func waitRunningWithClaims(e *framework.Env, n int, timeout time.Duration, what string) {
	e.T.Helper()
	e.Eventually(timeout, what, func(ctx context.Context) (bool, error) {
		if ok, err := itest.AllRunning(ctx, e, n); !ok || err != nil {
			return false, err
		}
		allocated, err := allocatedClaims(ctx, e)
		return allocated == n, err
	})
}
