// Command imagebuild writes the cluster-autoscaler container image as an
// OCI image layout packed in a tar file, without a Docker daemon: an empty
// base (scratch) with one layer holding the static binary at
// /cluster-autoscaler (CA roots and time zones are compiled into it), other
// binaries given with -add (the example external gRPC server), an
// /etc/passwd naming the non-root user 65534, and /tmp; the image runs as
// 65534:65534 and carries the version in its labels.
//
//	imagebuild -binary _output/linux_amd64/cluster-autoscaler -version v1.2.3 -arch amd64 -out _output/image.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	binary := flag.String("binary", "", "the static cluster-autoscaler binary")
	version := flag.String("version", "dev", "version label")
	arch := flag.String("arch", "amd64", "image architecture")
	repo := flag.String("repository", "cluster-autoscaler", "image name recorded in the index annotations")
	out := flag.String("out", "", "OCI layout tar file to write")
	var extra extraFiles
	flag.Var(&extra, "add", "name=path: another binary, at /name (repeatable)")
	flag.Parse()
	if err := run(*binary, *version, *arch, *repo, *out, extra); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

// epoch keeps the layer's file times fixed, so the same binary gives the
// same image digest.
var epoch = time.Unix(0, 0)

// extraFiles are other binaries of the image, by name.
type extraFiles [][2]string

func (e *extraFiles) String() string { return fmt.Sprint(*e) }
func (e *extraFiles) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" || strings.Contains(name, "/") {
		return fmt.Errorf("want name=path, got %q", v)
	}
	*e = append(*e, [2]string{name, path})
	return nil
}

func run(binary, version, arch, repo, out string, extra extraFiles) error {
	if binary == "" || out == "" {
		return fmt.Errorf("-binary and -out are required")
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "cluster-autoscaler", mode: 0o755, data: bin},
	}
	for _, e := range extra {
		data, err := os.ReadFile(e[1])
		if err != nil {
			return err
		}
		files = append(files, struct {
			name string
			mode int64
			data []byte
			dir  bool
		}{name: e[0], mode: 0o755, data: data})
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: epoch, Size: int64(len(f.data)), Typeflag: tar.TypeReg,
			Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   "cluster-autoscaler",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/kubernetes/autoscaler (drop-in replacement)",
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, "application/vnd.oci.image.manifest.v1+json"), layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = arch, "linux", v1.Time{Time: epoch}
	cfg.Config = v1.Config{Entrypoint: []string{"/cluster-autoscaler"}, User: "65534:65534", WorkingDir: "/",
		Env: []string{"PATH=/"}, Labels: labels}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, "application/vnd.oci.image.config.v1+json")

	dir, err := os.MkdirTemp(filepath.Dir(out), "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, "application/vnd.oci.image.index.v1+json"))
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
		"io.containerd.image.name":          repo + ":" + version,
	})); err != nil {
		return err
	}
	return tarDir(dir, out)
}

// tarDir packs the OCI layout directory into a tar file.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime = filepath.ToSlash(rel), epoch
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		f.Close()
		return err
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
