#!/usr/bin/env bash
# make demo: starts the local control plane, the autoscaler against it with
# --cloud-provider=kwok (or, with DEMO_CLOUD_PROVIDER=externalgrpc, through the
# example external gRPC server), applies a sample workload, and prints what
# happens until Ctrl-C (or for DEMO_DURATION seconds). With DEMO_PROMETHEUS=1 a
# Prometheus beside it scrapes the autoscaler every 5s with the chart's alert
# rules loaded. Everything listens on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

export LOCAL_CLUSTER_DIR=${LOCAL_CLUSTER_DIR:-_output/local}
address=${DEMO_ADDRESS:-127.0.0.1:8085}
duration=${DEMO_DURATION:-0} # 0 = until Ctrl-C
# After this many seconds the workload is deleted, so scale-down shows.
workload_for=${DEMO_WORKLOAD_SECONDS:-45}
kubectl=_output/bin/kubectl
export KUBECONFIG=$LOCAL_CLUSTER_DIR/kubeconfig
ca_log=$LOCAL_CLUSTER_DIR/logs/cluster-autoscaler.log

case "${DEMO_PROMETHEUS:-0}" in
  0|1) ;;
  *) echo "DEMO_PROMETHEUS must be 0 or 1, not ${DEMO_PROMETHEUS}" >&2; exit 2 ;;
esac

# Only the tools the demo runs: etcd, the kube binaries, kwok (and prometheus
# with DEMO_PROMETHEUS=1); hack/local-up.sh builds what is missing.
export TOOLS_SET=${TOOLS_SET:-demo}
hack/local-up.sh
# The ConfigMap is also the kwok provider's opt-in: without it (or
# --kwok-provider-enabled) the provider refuses to create Nodes in a cluster.
echo "== configuring the kwok provider's node groups (hack/demo/kwok-provider-config.yaml)"
$kubectl apply -f hack/demo/kwok-provider-config.yaml
echo "== applying the sample workload (hack/demo/workload.yaml)"
$kubectl apply -f hack/demo/workload.yaml
echo "== installing the ProvisioningRequest CRD and a request with its workload (hack/demo/provisioning-request.yaml)"
$kubectl apply --server-side -f provreq/crd/autoscaling.x-k8s.io_provisioningrequests.yaml
$kubectl wait --for condition=established --timeout=60s crd/provisioningrequests.autoscaling.x-k8s.io
$kubectl apply -f hack/demo/provisioning-request.yaml

# DEMO_CLOUD_PROVIDER=externalgrpc runs the same demo through the external gRPC
# cloud provider: the example server serves the kwok provider over the protocol.
provider_args=(--cloud-provider=kwok)
server_pid=
if [ "${DEMO_CLOUD_PROVIDER:-kwok}" = externalgrpc ]; then
  server_address=${DEMO_GRPC_ADDRESS:-127.0.0.1:8086}
  echo "== building and starting the example external gRPC server (log: $LOCAL_CLUSTER_DIR/logs/kwokserver.log)"
  go build -trimpath -o _output/bin/kwokserver ./cloudprovider/externalgrpc/examples/kwokserver
  _output/bin/kwokserver --address="$server_address" --kubeconfig="$KUBECONFIG" --namespace=kube-system \
    >"$LOCAL_CLUSTER_DIR/logs/kwokserver.log" 2>&1 &
  server_pid=$!
  printf 'address: %s\ngrpc_timeout: 5s\n' "$server_address" >"$LOCAL_CLUSTER_DIR/externalgrpc.yaml"
  provider_args=(--cloud-provider=externalgrpc --cloud-config="$LOCAL_CLUSTER_DIR/externalgrpc.yaml")
elif [ "${DEMO_CLOUD_PROVIDER:-kwok}" != kwok ]; then
  echo "DEMO_CLOUD_PROVIDER must be kwok or externalgrpc, not ${DEMO_CLOUD_PROVIDER}" >&2
  exit 2
fi

echo "== starting cluster-autoscaler (${provider_args[*]}; log: $ca_log)"
_output/bin/cluster-autoscaler \
  --kubeconfig="$KUBECONFIG" "${provider_args[@]}" --namespace=kube-system \
  --address="$address" --scan-interval=5s --v=2 --enable-provisioning-requests \
  --scale-down-unneeded-time=15s --scale-down-delay-after-add=20s --scale-down-delay-after-delete=0s \
  --max-graceful-termination-sec=5 --emit-per-nodegroup-metrics >"$ca_log" 2>&1 &
ca_pid=$!

# DEMO_PROMETHEUS=1: Prometheus (built by hack/build-tools.sh) scrapes the
# autoscaler and evaluates charts/cluster-autoscaler/files/alerts.yaml.
prom_pid=
prom_address=${DEMO_PROMETHEUS_ADDRESS:-127.0.0.1:9090}
case "${DEMO_PROMETHEUS:-0}" in
  0) ;;
  1)
    prom_dir=$LOCAL_CLUSTER_DIR/prometheus
    mkdir -p "$prom_dir"
    cat >"$prom_dir/prometheus.yml" <<EOF_PROM
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: ["$root/charts/cluster-autoscaler/files/alerts.yaml"]
scrape_configs:
  - job_name: cluster-autoscaler
    static_configs:
      - targets: ["$address"]
EOF_PROM
    echo "== starting prometheus on $prom_address (log: $LOCAL_CLUSTER_DIR/logs/prometheus.log)"
    _output/bin/prometheus --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$prom_dir/data" \
      --web.listen-address="$prom_address" >"$LOCAL_CLUSTER_DIR/logs/prometheus.log" 2>&1 &
    prom_pid=$!
    ;;
esac

cleanup() {
  trap - INT TERM EXIT
  echo
  echo "== stopping cluster-autoscaler"
  kill -TERM "$ca_pid" 2>/dev/null && wait "$ca_pid" 2>/dev/null || true
  if [ -n "$prom_pid" ]; then
    echo "== stopping prometheus"
    kill -TERM "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null || true
  fi
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  fi
  if [ "${DEMO_KEEP_CLUSTER:-0}" = 1 ]; then
    echo "== the control plane keeps running (KUBECONFIG=$KUBECONFIG); stop it with hack/local-down.sh"
  else
    hack/local-down.sh
  fi
}
# Ctrl-C (or a TERM) is how the demo is meant to end: clean up and exit 0.
# On any other exit (an error) clean up and keep the exit status.
trap 'cleanup; exit 0' INT TERM
trap cleanup EXIT

metric() { # prints the value of one series from /metrics, or "-"
  curl -s "http://$address/metrics" | awk -v s="$1" 'index($0, s) == 1 { print $2; found=1; exit } END { if (!found) print "-" }'
}

ago() { # prints a Unix time from /metrics (e.g. 1.79e+09) as "12s ago", or "-"
  awk -v t="$1" -v now="$(date +%s)" 'BEGIN { if (t == "-" || t == "") print "-"; else printf "%ds ago\n", now - t }'
}

for _ in $(seq 60); do # the autoscaler answers once its informers have synced
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$address/health-check" || true)" = 200 ] && break
  sleep 0.5
done
if [ -n "$prom_pid" ]; then
  for i in $(seq 61); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$prom_address/-/ready" || true)" = 200 ] && break
    if [ "$i" = 61 ] || ! kill -0 "$prom_pid" 2>/dev/null; then
      echo "prometheus did not become ready on $prom_address; last lines of its log:"
      tail -20 "$LOCAL_CLUSTER_DIR/logs/prometheus.log"; exit 1
    fi
    sleep 0.5
  done
  cat <<EOF_PROM
== Prometheus: http://$prom_address (job cluster-autoscaler, scraped every 5s, the chart's alerts loaded)
   Its HTTP API answers; the web UI is not built (its assets need npm). Try:
     curl -s 'http://$prom_address/api/v1/query?query=sum%20by%20(state)%20(cluster_autoscaler_nodes_count)'
     curl -s 'http://$prom_address/api/v1/alerts'
   or add it to a Grafana as a Prometheus data source and import charts/cluster-autoscaler/files/dashboard.json.
EOF_PROM
fi
echo "== watching (Ctrl-C to stop); the workload is deleted after ${workload_for}s, then unneeded nodes go"
start=$SECONDS
deleted=0
while :; do
  if ! kill -0 "$ca_pid" 2>/dev/null; then
    # Ctrl-C reaches the autoscaler too, which then stops cleanly (status 0)
    # before this loop's trap runs: that is the demo's normal end.
    if wait "$ca_pid" 2>/dev/null; then exit 0; fi
    echo "cluster-autoscaler exited; last lines of its log:"; tail -20 "$ca_log"; exit 1
  fi
  health=$(curl -s -o /dev/null -w '%{http_code}' "http://$address/health-check" || true)
  nodes=$($kubectl get nodes --no-headers 2>/dev/null | wc -l)
  running=$($kubectl get pods -n default --field-selector=status.phase=Running --no-headers 2>/dev/null | wc -l)
  pending=$($kubectl get pods -n default --field-selector=status.phase=Pending --no-headers 2>/dev/null | wc -l)
  printf '%s  health-check=%s  node_groups=%s  nodes=%s  pods running=%s pending=%s  last loop=%s  unschedulable_pods_count=%s  scaled_up_nodes_total=%s\n' \
    "$(date +%T)" "$health" "$(metric 'cluster_autoscaler_node_groups_count{node_group_type="autoscaled"}')" \
    "$nodes" "$running" "$pending" "$(ago "$(metric 'cluster_autoscaler_last_activity{activity="main"}')")" \
    "$(metric 'cluster_autoscaler_unschedulable_pods_count{type="unschedulable"}')" \
    "$(metric 'cluster_autoscaler_scaled_up_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name=""}')"
  printf '          unneeded_nodes_count=%s  scaled_down empty=%s underutilized=%s\n' \
    "$(metric 'cluster_autoscaler_unneeded_nodes_count')" \
    "$(metric 'cluster_autoscaler_scaled_down_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="empty"}')" \
    "$(metric 'cluster_autoscaler_scaled_down_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="underutilized"}')"
  printf '          provisioningrequest/demo-training: %s\n' \
    "$($kubectl get provisioningrequests demo-training -n default \
      -o jsonpath='{range .status.conditions[*]}{.type}={.status}({.reason}) {end}' 2>/dev/null || true)"
  if [ -n "$prom_pid" ]; then
    printf '          prometheus: alerts firing=%s pending=%s\n' \
      "$(curl -s "http://$prom_address/api/v1/alerts" | grep -o '"state":"firing"' | wc -l)" \
      "$(curl -s "http://$prom_address/api/v1/alerts" | grep -o '"state":"pending"' | wc -l)"
  fi
  if [ "$deleted" = 0 ] && [ $((SECONDS - start)) -ge "$workload_for" ]; then
    echo "== deleting the demo workload: the nodes it needed become unneeded and are removed"
    $kubectl delete deployment -n default demo-app demo-batch demo-training --wait=false >/dev/null
    deleted=1
  fi
  if [ "$duration" -gt 0 ] && [ $((SECONDS - start)) -ge "$duration" ]; then break; fi
  sleep 5
done
