package framework

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var toolsMu sync.Mutex

// Tool returns the path of binary name that hack/build-tools.sh builds into
// _output/bin from the module hack/tools/<module>, running the script first
// when the binary is missing or was built from another version of that module
// (the script's own freshness stamp). Like the control plane's binaries, the
// tools are required: a test that needs one fails when it cannot be built.
func Tool(module, name string) (string, error) {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "_output", "bin", name)
	if toolFresh(root, module, bin) {
		return bin, nil
	}
	fmt.Fprintf(os.Stderr, "%s is missing or stale; running hack/build-tools.sh\n", bin)
	cmd := exec.Command(filepath.Join(root, "hack", "build-tools.sh"))
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/build-tools.sh: %w", err)
	}
	if !toolFresh(root, module, bin) {
		return "", fmt.Errorf("hack/build-tools.sh did not build a current %s", bin)
	}
	return bin, nil
}

// toolFresh mirrors the stamp check of hack/build-tools.sh.
func toolFresh(root, module, bin string) bool {
	if info, err := os.Stat(bin); err != nil || info.Mode()&0o111 == 0 {
		return false
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, "hack", "tools", module, f))
		if err != nil {
			return false
		}
		h.Write(b)
	}
	stamp, err := os.ReadFile(filepath.Join(filepath.Dir(bin), ".stamp-"+module))
	return err == nil && strings.TrimSpace(string(stamp)) == hex.EncodeToString(h.Sum(nil))[:16]
}
