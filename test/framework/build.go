package framework

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// RaceEnv, when set to a non-empty value, makes BuildAutoscaler build the
// binary under test with the race detector in every test package (make
// test-race-binary); a package can also ask for it alone (BuildAutoscaler's
// race argument).
const RaceEnv = "AUTOSCALER_TEST_RACE"

// BinaryEnv names a cluster-autoscaler binary already built from this
// checkout (hack/test.sh builds it once before the packages start, as
// BuildAutoscaler does): BuildAutoscaler returns it instead of asking go
// build again in every package (some 2 CPU-s of the go command each). It is
// not used for a race build.
const BinaryEnv = "AUTOSCALER_TEST_BINARY"

// GoBuild builds the main package pkg (relative to dir) into out as
// hack/build-image.sh builds the image's binaries (CGO_ENABLED=0, -trimpath),
// so that the tests and test/image compile the module and its dependencies
// once between them in Go's build cache. With race it builds with -race
// instead (cgo on, as go test -race, whose compiled packages it then shares).
// Either way the binary is linked as the image's is, without its symbol table
// and DWARF (a third less CPU for the link; stack traces keep file and line).
func GoBuild(dir, out, pkg string, race bool) error {
	args := []string{"build", "-trimpath", "-ldflags=-s -w"}
	env := append(os.Environ(), "CGO_ENABLED=0")
	if race {
		args, env = []string{"build", "-race", "-ldflags=-s -w"}, append(os.Environ(), "CGO_ENABLED=1")
	}
	cmd := exec.Command("go", append(args, "-o", out, pkg)...)
	cmd.Dir, cmd.Env = dir, env
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// BuildAutoscaler builds ./cluster-autoscaler once for all the test
// packages of this checkout that run together: into one directory per
// repository root under the system's temporary directory, under a file lock,
// with go build, which leaves an up-to-date binary alone (the next package
// pays about 2 s, not a link of 160 MB). With race, or $AUTOSCALER_TEST_RACE
// set, it builds with -race, into a file of its own.
func BuildAutoscaler(race bool) (string, error) {
	if built := os.Getenv(BinaryEnv); built != "" && !race && os.Getenv(RaceEnv) == "" {
		if _, err := os.Stat(built); err != nil {
			return "", fmt.Errorf("$%s: %w", BinaryEnv, err)
		}
		return built, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "ca-test-bin-"+hex.EncodeToString(sum[:6]))
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
	race = race || os.Getenv(RaceEnv) != ""
	bin := filepath.Join(dir, "cluster-autoscaler")
	if race {
		bin += "-race"
	}
	if err := GoBuild(root, bin, "./cluster-autoscaler", race); err != nil {
		return "", fmt.Errorf("building cluster-autoscaler: %w", err)
	}
	return bin, nil
}
