#!/usr/bin/env bash
# Regenerates the checked-in Go code of the gRPC plug-in protocols from the
# .proto files beside it (protoc-gen-go and protoc-gen-go-grpc, pinned by
# hack/tools/proto; the .proto files are compiled by protocompile, so no
# protoc is needed). The tools are built into _output/bin, and rebuilt only
# when their module changed. With --verify nothing is changed: the script
# fails if the checked-in files differ from what would be generated. (make
# test checks the cheaper half on every run: each generated package's
# descriptor equals its .proto compiled afresh; see protocheck.)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUTPUT_DIR:-$root/_output}/bin
mod=$root/hack/tools/proto
mkdir -p "$out"

verify=false
case "${1:-}" in
  "") ;;
  --verify) verify=true ;;
  *) echo "usage: $0 [--verify]" >&2; exit 2 ;;
esac

want=$(cat "$mod"/go.mod "$mod"/go.sum "$mod"/*.go | sha256sum | cut -c1-16)
if [ ! -x "$out/protogen" ] || [ "$(cat "$out/.stamp-proto" 2>/dev/null)" != "$want" ]; then
  echo "building protogen, protoc-gen-go, protoc-gen-go-grpc (module hack/tools/proto)" >&2
  (cd "$mod" && go build -trimpath -o "$out/protogen" . &&
    go build -trimpath -o "$out/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc)
  echo "$want" > "$out/.stamp-proto"
fi

cd "$root"
mapfile -t protos < <(git ls-files '*.proto' | grep -v '^hack/')
if [ ${#protos[@]} -eq 0 ]; then echo "no .proto files" >&2; exit 1; fi
generated=()
for p in "${protos[@]}"; do generated+=("${p%.proto}.pb.go"); done
for p in "${protos[@]}"; do
  if grep -q '^service ' "$p"; then generated+=("${p%.proto}_grpc.pb.go"); fi
done

if $verify; then
  keep=$(mktemp -d)
  trap 'for f in "${generated[@]}"; do [ -f "$keep/$f" ] && cp "$keep/$f" "$f"; done; rm -rf "$keep"' EXIT
  for f in "${generated[@]}"; do mkdir -p "$keep/$(dirname "$f")"; [ -f "$f" ] && cp "$f" "$keep/$f"; done
fi

"$out/protogen" -root . -plugin "$out/protoc-gen-go" -plugin "$out/protoc-gen-go-grpc" "${protos[@]}"

if $verify; then
  stale=0
  for f in "${generated[@]}"; do
    if ! cmp -s "$f" "$keep/$f"; then echo "out of date: $f (run hack/update-proto.sh)" >&2; stale=1; fi
  done
  exit $stale
fi
