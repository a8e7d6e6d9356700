package chart_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

var (
	// repoRoot is the repository's root directory.
	repoRoot string
	// helmBinary is _output/bin/helm, built from hack/tools/helm.
	helmBinary string
	// autoscalerBinary is the cluster-autoscaler built once for this package.
	autoscalerBinary string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if framework.NothingToRun() {
		return m.Run() // no helm, binary or control plane needed
	}
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot = root
	if helmBinary, err = ensureHelm(root); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		return 1
	}
	if autoscalerBinary, err = framework.BuildAutoscaler(false); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		return 1
	}
	return framework.Main(m)
}

// ensureHelm returns _output/bin/helm, running hack/build-tools.sh first when
// the binary is missing or was built from another version of hack/tools/helm
// (the script's own freshness stamp).
func ensureHelm(root string) (string, error) {
	bin := filepath.Join(root, "_output", "bin", "helm")
	if helmFresh(root, bin) {
		return bin, nil
	}
	fmt.Fprintln(os.Stderr, "chart: _output/bin/helm is missing or stale; running hack/build-tools.sh")
	cmd := exec.Command(filepath.Join(root, "hack", "build-tools.sh"))
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/build-tools.sh: %w", err)
	}
	if !helmFresh(root, bin) {
		return "", fmt.Errorf("hack/build-tools.sh did not build a current %s", bin)
	}
	return bin, nil
}

// helmFresh mirrors the stamp check of hack/build-tools.sh.
func helmFresh(root, bin string) bool {
	if info, err := os.Stat(bin); err != nil || info.Mode()&0o111 == 0 {
		return false
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, "hack", "tools", "helm", f))
		if err != nil {
			return false
		}
		h.Write(b)
	}
	stamp, err := os.ReadFile(filepath.Join(filepath.Dir(bin), ".stamp-helm"))
	return err == nil && strings.TrimSpace(string(stamp)) == hex.EncodeToString(h.Sum(nil))[:16]
}
