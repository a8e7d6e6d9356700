#!/usr/bin/env bash
# Stops exactly the processes hack/local-up.sh recorded, nothing else.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
go run -trimpath ./hack/localcluster down --dir "${LOCAL_CLUSTER_DIR:-_output/local}"
