package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// autoscalerBinary is the cluster-autoscaler built once for this package.
var autoscalerBinary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ca-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	autoscalerBinary = filepath.Join(dir, "cluster-autoscaler")
	build := exec.Command("go", "build", "-o", autoscalerBinary, "./cluster-autoscaler")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cluster-autoscaler:", err)
		return 1
	}
	return framework.Main(m)
}
