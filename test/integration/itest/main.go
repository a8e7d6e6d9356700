package itest

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// RaceEnv, when set to a non-empty value, builds the binary under test with
// the race detector; a process whose log then reports a data race fails its
// test (see StartProcess). CI sets it for one run (Makefile: test-race-binary).
const RaceEnv = "AUTOSCALER_TEST_RACE"

// AutoscalerBinary is the cluster-autoscaler under test, set by Main.
var AutoscalerBinary string

// Main builds the cluster-autoscaler (see BuildAutoscaler), then starts the
// package's control plane and runs its tests (framework.Main). Each package
// of test/integration calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }
func Main(m *testing.M) int {
	bin, err := BuildAutoscaler()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	AutoscalerBinary = bin
	return framework.Main(m)
}

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

// BuildAutoscaler builds ./cluster-autoscaler once for every test package of
// this checkout: into one directory per repository root under the system's
// temporary directory, under a file lock, with go build, which leaves an
// up-to-date binary alone (a second package pays about 2 s, not a link).
// With $AUTOSCALER_TEST_RACE set it builds with -race, into a file of its own.
func BuildAutoscaler() (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "ca-itest-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	bin, args := filepath.Join(dir, "cluster-autoscaler"), []string{"build"}
	if os.Getenv(RaceEnv) != "" {
		bin += "-race"
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "-o", bin, "./cluster-autoscaler")...)
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building cluster-autoscaler: %w", err)
	}
	return bin, nil
}
