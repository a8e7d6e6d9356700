#!/usr/bin/env bash
# Builds the container image without a Docker daemon, for linux/amd64 and
# linux/arm64: a static cluster-autoscaler binary per architecture (Go
# cross-compiles: CGO_ENABLED=0 GOARCH=...) in a scratch image (non-root user
# 65534, CA roots and time zones compiled into the binary, the version in the
# labels), the images under one OCI image index, written as an OCI image
# layout in a tar file.
#
#   hack/build-image.sh                  # _output/cluster-autoscaler-image.tar, amd64 and arm64
#   ARCHS=arm64 IMAGE_OUT=/tmp/x.tar VERSION=v1.2.3 hack/build-image.sh   # one architecture (ARCH= too)
#
# The binaries stay in _output/linux_<arch>, so a second run only links what changed (Go's build cache).
# Push it with any OCI tool, e.g. crane (go install github.com/google/go-containerregistry/cmd/crane), which
# pushes the index with both images under one tag:
#   mkdir l && tar -C l -xf _output/cluster-autoscaler-image.tar && crane push l registry.example/cluster-autoscaler:v1.2.3
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUTPUT_DIR:-$root/_output}
bin=$out/bin
mod=$root/hack/tools/image
archs=${ARCHS:-${ARCH:-amd64 arm64}}
version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo v0.1.0-dev)}
image=${IMAGE_OUT:-$out/cluster-autoscaler-image.tar}
mkdir -p "$bin" "$(dirname "$image")"

want=$(cat "$mod"/go.mod "$mod"/go.sum "$mod"/*.go | sha256sum | cut -c1-16)
if [ ! -x "$bin/imagebuild" ] || [ "$(cat "$bin/.stamp-image" 2>/dev/null)" != "$want" ]; then
  echo "building imagebuild (module hack/tools/image)" >&2
  (cd "$mod" && go build -trimpath -o "$bin/imagebuild" .)
  echo "$want" > "$bin/.stamp-image"
fi

platforms=()
for arch in $archs; do
  dir=$out/linux_$arch
  mkdir -p "$dir"
  (cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$dir/cluster-autoscaler" ./cluster-autoscaler)
  # The example external gRPC server goes in too, for the chart's externalGRPC.exampleServer.
  (cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w" \
    -o "$dir/kwokserver" ./cloudprovider/externalgrpc/examples/kwokserver)
  platforms+=(-platform "$arch=$dir")
done
"$bin/imagebuild" "${platforms[@]}" -add kwokserver -version "$version" -out "$image"
echo "wrote $image (linux: $archs; $version)"
