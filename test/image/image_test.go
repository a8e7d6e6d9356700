// Package image tests the container image hack/build-image.sh writes: it
// reads the OCI layout with the standard library only, checks that its index
// holds one image per platform (linux/amd64 and linux/arm64), each with its
// configuration and binaries built for its architecture (the ELF machine),
// and runs the binaries of the machine's own architecture from the unpacked
// layers.
package image

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

const (
	ociIndex    = "application/vnd.oci.image.index.v1+json"
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
)

// machines is the ELF machine of each architecture the image is built for.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func TestImageRunsTheBinary(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "image.tar")
	build := exec.Command(filepath.Join(root, "hack", "build-image.sh"))
	// IMAGE_TEST_ARCHS narrows the architectures built: make test builds
	// the machine's own only (a second architecture is a second compile of
	// the module, some 540 CPU-s on a cold cache: docs/test-times.md), make
	// test-slow both, as make image does.
	want := []string{"linux/amd64", "linux/arm64"}
	archs := os.Getenv("IMAGE_TEST_ARCHS")
	if archs != "" {
		want = nil
		for _, a := range strings.Fields(archs) {
			want = append(want, "linux/"+a)
		}
		slices.Sort(want)
	}
	build.Env = append(os.Environ(), "IMAGE_OUT="+tarPath, "VERSION=v9.9.9-imagetest", "ARCHS="+archs, "ARCH=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("hack/build-image.sh: %v\n%s", err, out)
	}
	layout := filepath.Join(dir, "layout")
	untar(t, tarPath, layout, false)

	// index.json names one image index (the tag's target), which names one
	// image manifest per platform.
	var top struct{ Manifests []descriptor }
	readJSON(t, filepath.Join(layout, "index.json"), &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != ociIndex ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v9.9.9-imagetest" {
		t.Fatalf("index.json manifests %+v: want one %s tagged v9.9.9-imagetest", top.Manifests, ociIndex)
	}
	var index struct {
		MediaType string
		Manifests []descriptor
	}
	readJSON(t, blob(layout, top.Manifests[0].Digest), &index)
	var platforms []string
	images := map[string]descriptor{}
	for _, m := range index.Manifests {
		if m.Platform == nil || m.MediaType != ociManifest {
			t.Fatalf("image index entry %+v: want an %s with a platform", m, ociManifest)
		}
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		images[m.Platform.Architecture] = m
	}
	slices.Sort(platforms)
	if index.MediaType != ociIndex || !slices.Equal(platforms, want) {
		t.Fatalf("image index %s with platforms %v, want %s with %v", index.MediaType, platforms, ociIndex, want)
	}

	if _, ok := images[runtime.GOARCH]; !ok {
		t.Logf("no image for this machine's architecture %s: the binaries are checked, not run", runtime.GOARCH)
	}
	for arch, m := range images {
		t.Run(arch, func(t *testing.T) {
			rootfs := checkImage(t, layout, m, arch)
			for _, name := range []string{"cluster-autoscaler", "kwokserver"} {
				f, err := elf.Open(filepath.Join(rootfs, name))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if f.Machine != machines[arch] || f.Class != elf.ELFCLASS64 {
					t.Errorf("%s of linux/%s is an ELF for %v (%v), want %v", name, arch, f.Machine, f.Class, machines[arch])
				}
				f.Close()
			}
			if arch == runtime.GOARCH {
				runBinaries(t, rootfs)
			}
		})
	}
}

// checkImage reads the image of one platform: its configuration, then its
// layers unpacked into a directory it returns.
func checkImage(t *testing.T, layout string, m descriptor, arch string) string {
	t.Helper()
	var manifest struct {
		MediaType string
		Config    descriptor
		Layers    []descriptor
	}
	readJSON(t, blob(layout, m.Digest), &manifest)
	var config struct {
		Architecture, OS string
		Config           struct {
			User       string
			Entrypoint []string
			Labels     map[string]string
		}
	}
	readJSON(t, blob(layout, manifest.Config.Digest), &config)
	if config.OS != "linux" || config.Architecture != arch || config.Config.User != "65534:65534" ||
		strings.Join(config.Config.Entrypoint, " ") != "/cluster-autoscaler" ||
		config.Config.Labels["org.opencontainers.image.version"] != "v9.9.9-imagetest" {
		t.Errorf("image config %+v: want linux/%s, user 65534:65534, entrypoint /cluster-autoscaler, version label", config, arch)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	for _, l := range manifest.Layers {
		untar(t, blob(layout, l.Digest), rootfs, strings.Contains(l.MediaType, "gzip"))
	}
	passwd, err := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
	if err != nil || !strings.Contains(string(passwd), ":65534:65534:") {
		t.Errorf("/etc/passwd %q (%v) does not name user 65534", passwd, err)
	}
	return rootfs
}

// runBinaries runs the image's binaries (of this machine's architecture).
func runBinaries(t *testing.T, rootfs string) {
	t.Helper()
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
