// Package image tests the container image hack/build-image.sh writes: it
// reads the OCI layout with the standard library only, checks the image's
// configuration, unpacks its layers and runs the binary from them.
package image

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
}

func TestImageRunsTheBinary(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "image.tar")
	build := exec.Command(filepath.Join(root, "hack", "build-image.sh"))
	build.Env = append(os.Environ(), "IMAGE_OUT="+tarPath, "VERSION=v9.9.9-imagetest")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("hack/build-image.sh: %v\n%s", err, out)
	}
	layout := filepath.Join(dir, "layout")
	untar(t, tarPath, layout, false)

	var index struct{ Manifests []descriptor }
	readJSON(t, filepath.Join(layout, "index.json"), &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(index.Manifests))
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	readJSON(t, blob(layout, index.Manifests[0].Digest), &manifest)
	var config struct {
		Architecture, OS string
		Config           struct {
			User       string
			Entrypoint []string
			Labels     map[string]string
		}
	}
	readJSON(t, blob(layout, manifest.Config.Digest), &config)
	if config.OS != "linux" || config.Config.User != "65534:65534" ||
		strings.Join(config.Config.Entrypoint, " ") != "/cluster-autoscaler" ||
		config.Config.Labels["org.opencontainers.image.version"] != "v9.9.9-imagetest" {
		t.Errorf("image config %+v: want linux, user 65534:65534, entrypoint /cluster-autoscaler, version label", config)
	}

	rootfs := filepath.Join(dir, "rootfs")
	for _, l := range manifest.Layers {
		untar(t, blob(layout, l.Digest), rootfs, strings.Contains(l.MediaType, "gzip"))
	}
	passwd, err := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
	if err != nil || !strings.Contains(string(passwd), ":65534:65534:") {
		t.Errorf("/etc/passwd %q (%v) does not name user 65534", passwd, err)
	}
	binary := filepath.Join(rootfs, "cluster-autoscaler")
	out, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v9.9.9-imagetest") {
		t.Errorf("--version: %v, %q; want the version", err, out)
	}
	out, err = exec.Command(binary, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--scan-interval") {
		t.Errorf("--help: %v; output lacks --scan-interval:\n%s", err, out)
	}
	// The example external gRPC server the chart can deploy from the same image.
	out, err = exec.Command(filepath.Join(rootfs, "kwokserver"), "-help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-kwok-config") {
		t.Errorf("kwokserver -help: %v; output lacks -kwok-config:\n%s", err, out)
	}
}

func blob(layout, digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(layout, "blobs", algo, hex)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// untar extracts regular files and directories of the tar at path into dir.
func untar(t *testing.T, path, dir string, gz bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, data, os.FileMode(h.Mode)&0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
}
