#!/usr/bin/env bash
# Builds what is missing and starts the local control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kwok) on 127.0.0.1.
# State, logs and the admin kubeconfig go to ${LOCAL_CLUSTER_DIR:-_output/local}.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
hack/build-tools.sh
go run -trimpath ./hack/localcluster up --dir "${LOCAL_CLUSTER_DIR:-_output/local}" "$@"
