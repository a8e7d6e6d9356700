#!/usr/bin/env bash
# Builds the local control-plane binaries (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, kwok), helm for test/chart, Cluster API's
# controller manager for the clusterapi tests, and prometheus and promtool for
# the chart's alerts and dashboard, from the Go module proxy into _output/bin.
# A binary is rebuilt only when the module that
# pins it changed, so a warm run costs a few seconds. Cold, on 2 cores, expect
# about 30 minutes (prometheus and promtool: 267 s, cluster-api: 223 s with an
# empty build cache).
#
# The kube, kwok and etcd modules select the autoscaler's version of every
# module they share with it, so the packages make build compiled are reused
# here (TestDemoBuildsShareModuleVersions): bump them together.
#
# TOOLS_SET=demo builds only what make demo runs: etcd, the kube binaries and
# kwok, and prometheus only with DEMO_PROMETHEUS=1 (helm and Cluster API are
# for the tests). The default, TOOLS_SET=all, builds everything.
set -euo pipefail

tools_set=${TOOLS_SET:-all}
case "$tools_set" in
  all|demo) ;;
  *) echo "TOOLS_SET must be all or demo, not $tools_set" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUTPUT_DIR:-$root/_output}/bin
mkdir -p "$out"

kube_version=v1.36.3
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${kube_version} \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
-X k8s.io/component-base/version.gitTreeState=clean"

# stamp prints a digest of a tool module's go.mod and go.sum.
stamp() { cat "$root/hack/tools/$1/go.mod" "$root/hack/tools/$1/go.sum" | sha256sum | cut -c1-16; }

# fresh reports whether every named binary exists and was built from the current module.
fresh() {
  local mod=$1; shift
  local want; want=$(stamp "$mod")
  [ -f "$out/.stamp-$mod" ] && [ "$(cat "$out/.stamp-$mod")" = "$want" ] || return 1
  for b in "$@"; do [ -x "$out/$b" ] || return 1; done
}

# build builds the packages of a tools module into $out, each binary named
# after its package's last path element, or $bin_name (one package only).
build() {
  local mod=$1 ldflags=$2; shift 2
  local bins=("$@") tags=${build_tags:-} name=${bin_name:-}
  local names=("${bins[@]##*/}")
  if [ -n "$name" ]; then names=("$name"); fi
  if fresh "$mod" "${names[@]}"; then return 0; fi
  echo "building ${names[*]} (module hack/tools/$mod)" >&2
  local start=$SECONDS
  (cd "$root/hack/tools/$mod" && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out/$name" "${bins[@]}")
  stamp "$mod" > "$out/.stamp-$mod"
  echo "built ${names[*]} in $((SECONDS - start))s" >&2
}

build etcd "-s -w" k8s.io/autoscaler/cluster-autoscaler/hack/tools/etcd
build kwok "-s -w" sigs.k8s.io/kwok/cmd/kwok
build kube "$kube_ldflags" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl
if [ "$tools_set" = all ]; then
  # Cluster API's core controller manager (MachineDeployment, MachineSet, Machine,
  # Cluster controllers) for the clusterapi provider's integration tests; its
  # main package is sigs.k8s.io/cluster-api/core since v1.14.
  bin_name=cluster-api build capi "-s -w" sigs.k8s.io/cluster-api/core
  build helm "-s -w -X helm.sh/helm/v4/internal/version.version=v4.3.1" helm.sh/helm/v4/cmd/helm
fi
# Prometheus (for the chart's alerts and dashboard: test/chart, test/integration,
# make demo) with only the static, file and HTTP service discovery
# (remove_all_sd): the tests and the demo scrape fixed loopback addresses, so the
# cloud and Kubernetes discovery code is left out. The web UI's assets are not
# in the module (they need an npm build): the server answers its HTTP API only.
prometheus_version=3.16.0 # the module's v0.316.0
if [ "$tools_set" = all ] || [ "${DEMO_PROMETHEUS:-0}" = 1 ]; then
  build_tags=remove_all_sd build prometheus "-s -w -X github.com/prometheus/common/version.Version=${prometheus_version}" \
    github.com/prometheus/prometheus/cmd/prometheus \
    github.com/prometheus/prometheus/cmd/promtool
fi

# kwok has no built-in stages: take the ones its module ships (read from the
# module cache, not committed here) and keep them beside the binaries.
stages=${OUTPUT_DIR:-$root/_output}/kwok-stages
if [ ! -f "$stages/.stamp" ] || [ "$(cat "$stages/.stamp")" != "$(stamp kwok)" ]; then
  src=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
  mkdir -p "$stages"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    install -m 0644 "$src/$f" "$stages/$(basename "$f")"
  done
  stamp kwok > "$stages/.stamp"
fi
