package main

import (
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// demoBuilds are the binaries `make demo` builds, each from its module's
// directory (relative to the repository's root): the autoscaler, then what
// hack/build-tools.sh builds for TOOLS_SET=demo.
var demoBuilds = []struct {
	dir  string
	pkgs []string
}{
	{".", []string{"./cluster-autoscaler"}},
	{"hack/tools/etcd", []string{"."}},
	{"hack/tools/kwok", []string{"sigs.k8s.io/kwok/cmd/kwok"}},
	{"hack/tools/kube", []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-scheduler",
		"k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kubectl"}},
}

// TestDemoBuildsShareModuleVersions: every module whose packages two of
// make demo's builds compile is selected at the same version by both, so
// that a package compiled for one is reused from the build cache by the
// next (Go's cache key covers the versions of a package's imports: one
// differing golang.org/x/sys recompiles nearly everything above it). This
// is what keeps a cold `make demo` to one compilation of the Kubernetes
// libraries instead of one per build. When a go.mod is bumped, bump the
// others to the same versions.
func TestDemoBuildsShareModuleVersions(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// module path -> version -> the builds that compile packages of it
	seen := map[string]map[string][]string{}
	for _, b := range demoBuilds {
		args := append([]string{"list", "-deps", "-f",
			"{{if not .Standard}}{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}"},
			b.pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(root, b.dir)
		out, err := cmd.Output()
		if err != nil {
			msg := err.Error()
			if ee, ok := err.(*exec.ExitError); ok {
				msg = string(ee.Stderr)
			}
			t.Fatalf("go list in %s: %s", b.dir, msg)
		}
		mods := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] != "" {
				mods[f[0]] = f[1]
			}
		}
		if len(mods) < 10 {
			t.Fatalf("go list in %s named only %d modules: %q", b.dir, len(mods), out)
		}
		for m, v := range mods {
			if seen[m] == nil {
				seen[m] = map[string][]string{}
			}
			seen[m][v] = append(seen[m][v], b.dir)
		}
	}
	var differ []string
	shared := 0
	for m, versions := range seen {
		n := 0
		for _, dirs := range versions {
			n += len(dirs)
		}
		if n > 1 {
			shared++
		}
		if len(versions) > 1 {
			var parts []string
			for v, dirs := range versions {
				parts = append(parts, v+" in "+strings.Join(dirs, ", "))
			}
			sort.Strings(parts)
			differ = append(differ, m+": "+strings.Join(parts, "; "))
		}
	}
	sort.Strings(differ)
	if len(differ) > 0 {
		t.Errorf("%d of the %d modules that make demo's builds share are at different versions (each difference "+
			"compiles the packages above it once more):\n%s", len(differ), shared, strings.Join(differ, "\n"))
	}
	if shared < 50 {
		t.Errorf("only %d modules shared by make demo's builds; expected the Kubernetes libraries among them", shared)
	}
}
