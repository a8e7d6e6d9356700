#!/usr/bin/env bash
# Regenerates the checked-in code of the ProvisioningRequest and
# CapacityBuffer APIs with controller-gen (pinned by hack/tools/codegen):
#   provreq/apis/autoscaling.x-k8s.io/*/zz_generated.deepcopy.go
#   provreq/crd/autoscaling.x-k8s.io_provisioningrequests.yaml
#   capacitybuffer/apis/autoscaling.x-k8s.io/*/zz_generated.deepcopy.go
#   capacitybuffer/crd/autoscaling.x-k8s.io_capacitybuffers.yaml
# controller-gen is built into _output/bin, and rebuilt only when its module
# changed. With --verify nothing is changed: the script fails if the
# checked-in files differ from what would be generated.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUTPUT_DIR:-$root/_output}/bin
mod=$root/hack/tools/codegen
mkdir -p "$out"

verify=false
case "${1:-}" in
  "") ;;
  --verify) verify=true ;;
  *) echo "usage: $0 [--verify]" >&2; exit 2 ;;
esac

want=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
if [ ! -x "$out/controller-gen" ] || [ "$(cat "$out/.stamp-codegen" 2>/dev/null)" != "$want" ]; then
  echo "building controller-gen (module hack/tools/codegen)" >&2
  (cd "$mod" && go build -trimpath -o "$out/" sigs.k8s.io/controller-tools/cmd/controller-gen)
  echo "$want" > "$out/.stamp-codegen"
fi

generated=(provreq/apis/autoscaling.x-k8s.io/v1/zz_generated.deepcopy.go
           provreq/apis/autoscaling.x-k8s.io/v1beta1/zz_generated.deepcopy.go
           provreq/crd/autoscaling.x-k8s.io_provisioningrequests.yaml
           capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1/zz_generated.deepcopy.go
           capacitybuffer/apis/autoscaling.x-k8s.io/v1alpha1/zz_generated.deepcopy.go
           capacitybuffer/crd/autoscaling.x-k8s.io_capacitybuffers.yaml)

cd "$root"
if $verify; then
  # Generate into a scratch copy of the tree's outputs, compare, put the
  # checked-in files back.
  keep=$(mktemp -d)
  trap 'for f in "${generated[@]}"; do [ -f "$keep/$f" ] && cp "$keep/$f" "$f"; done; rm -rf "$keep"' EXIT
  for f in "${generated[@]}"; do mkdir -p "$keep/$(dirname "$f")"; cp "$f" "$keep/$f"; done
fi

# One API per run: each run writes the CRDs of its packages into its crd folder.
for api in provreq capacitybuffer; do
  "$out/controller-gen" object paths="./$api/apis/..."
  "$out/controller-gen" crd:crdVersions=v1 paths="./$api/apis/..." output:crd:artifacts:config="$api/crd"
done

if $verify; then
  stale=0
  for f in "${generated[@]}"; do
    if ! cmp -s "$f" "$keep/$f"; then echo "out of date: $f (run hack/update-codegen.sh)" >&2; stale=1; fi
  done
  exit $stale
fi
