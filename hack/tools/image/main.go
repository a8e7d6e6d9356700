// Command imagebuild writes the cluster-autoscaler container image as an
// OCI image layout packed in a tar file, without a Docker daemon: an image
// index with one image per platform (linux/amd64 and linux/arm64 from
// hack/build-image.sh), each an empty base (scratch) with one layer holding
// the static binary at /cluster-autoscaler (CA roots and time zones are
// compiled into it), other binaries named with -add (the example external
// gRPC server), an /etc/passwd naming the non-root user 65534, and /tmp;
// the images run as 65534:65534 and carry the version in their labels.
//
//	imagebuild -platform amd64=_output/linux_amd64 -platform arm64=_output/linux_arm64 -add kwokserver \
//	  -version v1.2.3 -out _output/image.tar
//
// Each platform's directory holds cluster-autoscaler and each -add binary,
// built for that architecture.
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
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func main() {
	version := flag.String("version", "dev", "version label")
	repo := flag.String("repository", "cluster-autoscaler", "image name recorded in the index annotations")
	out := flag.String("out", "", "OCI layout tar file to write")
	var platforms platformDirs
	flag.Var(&platforms, "platform", "arch=dir: the linux/arch image from the binaries in dir (repeatable)")
	var extra extraNames
	flag.Var(&extra, "add", "name: another binary of each platform's directory, at /name (repeatable)")
	flag.Parse()
	if err := run(platforms, extra, *version, *repo, *out); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

// epoch keeps the layer's file times fixed, so the same binary gives the
// same image digest.
var epoch = time.Unix(0, 0)

// platformDirs are the image's architectures, each with the directory of
// its binaries.
type platformDirs [][2]string

func (p *platformDirs) String() string { return fmt.Sprint(*p) }
func (p *platformDirs) Set(v string) error {
	arch, dir, ok := strings.Cut(v, "=")
	if !ok || arch == "" || dir == "" {
		return fmt.Errorf("want arch=dir, got %q", v)
	}
	for _, have := range *p {
		if have[0] == arch {
			return fmt.Errorf("platform %s given twice", arch)
		}
	}
	*p = append(*p, [2]string{arch, dir})
	return nil
}

// extraNames are other binaries of the image, by name.
type extraNames []string

func (e *extraNames) String() string { return fmt.Sprint(*e) }
func (e *extraNames) Set(v string) error {
	if v == "" || strings.Contains(v, "/") || v == "cluster-autoscaler" {
		return fmt.Errorf("want a file name other than cluster-autoscaler, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

func run(platforms platformDirs, extra extraNames, version, repo, out string) error {
	if len(platforms) == 0 || out == "" {
		return fmt.Errorf("-platform and -out are required")
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := platformImage(p[0], p[1], extra, version)
		if err != nil {
			return fmt.Errorf("linux/%s: %w", p[0], err)
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: p[0]},
		}})
	}

	dir, err := os.MkdirTemp(filepath.Dir(out), "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return err
	}
	if err := p.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
		"io.containerd.image.name":          repo + ":" + version,
	})); err != nil {
		return err
	}
	return tarDir(dir, out)
}

// platformImage is the image of one architecture, from the binaries in dir.
func platformImage(arch, dir string, extra extraNames, version string) (v1.Image, error) {
	type file struct {
		name string
		mode int64
		data []byte
		dir  bool
	}
	files := []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	for _, name := range append([]string{"cluster-autoscaler"}, extra...) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		files = append(files, file{name: name, mode: 0o755, data: data})
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: epoch, Size: int64(len(f.data)), Typeflag: tar.TypeReg,
			Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   "cluster-autoscaler",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/kubernetes/autoscaler (drop-in replacement)",
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = arch, "linux", v1.Time{Time: epoch}
	cfg.Config = v1.Config{Entrypoint: []string{"/cluster-autoscaler"}, User: "65534:65534", WorkingDir: "/",
		Env: []string{"PATH=/"}, Labels: labels}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
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
