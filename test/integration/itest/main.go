package itest

import (
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// AutoscalerBinary is the cluster-autoscaler under test, set by Main.
var AutoscalerBinary string

// Main builds the cluster-autoscaler (see framework.BuildAutoscaler), then starts the
// package's control plane and runs its tests (framework.Main). Each package
// of test/integration calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }
//
// With $AUTOSCALER_TEST_RACE set the binary is built with -race: a process
// that reports a data race fails its test (see startProcess). make test-slow
// runs test/integration/scaledown so; make test-race-binary every package.
func Main(m *testing.M) int {
	if framework.NothingToRun() {
		return m.Run() // nothing to build or start for
	}
	bin, err := framework.BuildAutoscaler(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	AutoscalerBinary = bin
	code := framework.Main(m)
	if n := processes.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "itest: %d processes started by the tests (autoscalers, servers): %.0f CPU-s\n", n,
			time.Duration(processNanos.Load()).Seconds())
	}
	return code
}

// processes and processNanos count the processes startProcess started and
// the CPU time they used, for docs/test-times.md (which part of a package's
// CPU is the binaries under test, which the control plane).
var processes, processNanos atomic.Int64

// MainBenchmarks is Main for a package of benchmarks only: without -test.bench
// there is nothing to run, so it neither builds the binary nor starts a
// control plane.
func MainBenchmarks(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		return m.Run()
	}
	return Main(m)
}

// SlowEnv, set to a non-empty value, runs the slow fault and failover tests
// (package faults): make test-slow sets it, and CI runs that target after
// make test while its time budget allows (.ci/run). Without it their package
// starts no control plane and each of its tests skips, saying so.
const SlowEnv = "INTEGRATION_SLOW"

// MainSlow is Main for the package of slow tests: without $INTEGRATION_SLOW
// it builds nothing and starts no control plane (its tests skip).
func MainSlow(m *testing.M) int {
	if os.Getenv(SlowEnv) == "" {
		return m.Run()
	}
	return Main(m)
}

// SkipUnlessSlow skips a slow test unless $INTEGRATION_SLOW is set.
func SkipUnlessSlow(t testing.TB) {
	t.Helper()
	if os.Getenv(SlowEnv) == "" {
		t.Skipf("a slow test: make test-slow (%s=1) runs it", SlowEnv)
	}
}
