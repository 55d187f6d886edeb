#!/usr/bin/env bash
# The share of inputs that cross between nodes when a client goes through HAProxy: starts
# scripts/cluster.sh (Redis, three bff nodes, HAProxy) with each given HAProxy configuration in turn,
# drives it with `bff-load latency` through HAProxy's port (sessions created, streamed and fed through
# it), and prints, from the nodes' /metrics before and after the run, the inputs the nodes accepted
# (bff_inputs_total) and those forwarded to another node (bff_cluster_inputs_owned_elsewhere_total).
#   bench/measure-forwarding.sh                          # deploy/haproxy.cfg
#   bench/measure-forwarding.sh old.cfg deploy/haproxy.cfg   # before and after, in one run
# Env: MF_SESSIONS (100), MF_RATE (inputs/s, 200), MF_DURATION (s, 10), BFF_BIN_DIR (default: build
# bff, github-sim and bff-load in debug first), MF_PORT_BASE (18280: HAProxy, stats +1, Redis +2,
# nodes +11..+13).
set -euo pipefail
cd "$(dirname "$0")/.."
configs=("$@")
((${#configs[@]})) || configs=(deploy/haproxy.cfg)
sessions=${MF_SESSIONS:-100}
rate=${MF_RATE:-200}
duration=${MF_DURATION:-10}
p=${MF_PORT_BASE:-18280}
bin=${BFF_BIN_DIR:-}
if [ -z "$bin" ]; then
  for product in bff github-sim bff-load; do swift build --product "$product" >&2; done
  bin=$(swift build --show-bin-path)
fi
nodes=($((p + 11)) $((p + 12)) $((p + 13)))
sum() {  # the sum of metric $1 over the nodes
  local total=0 v
  for n in "${nodes[@]}"; do
    v=$(curl -fs "http://127.0.0.1:$n/metrics" | awk -v m="$1" '$1 == m { print int($2) }')
    total=$((total + ${v:-0}))
  done
  echo "$total"
}
printf '%-28s %8s %10s %9s\n' "haproxy config" inputs forwarded share
for cfg in "${configs[@]}"; do
  logs=$(mktemp -d /tmp/bff-measure-forwarding.XXXXXX)
  BFF_BIN_DIR=$bin HAPROXY_CFG=$cfg LOGS_DIR=$logs PORT=$p STATS_PORT=$((p + 1)) REDIS_PORT=$((p + 2)) \
    NODE_BASE_PORT=$((p + 11)) setsid scripts/cluster.sh >"$logs/cluster.out" 2>&1 &
  cluster=$!
  for _ in $(seq 600); do grep -q "cluster.sh: ready" "$logs/cluster.out" && break; sleep 0.1; done
  grep -q "cluster.sh: ready" "$logs/cluster.out" || { cat "$logs/cluster.out" >&2; kill -TERM $cluster; exit 1; }
  inputs0=$(sum bff_inputs_total)
  forwarded0=$(sum bff_cluster_inputs_owned_elsewhere_total)
  "$bin/bff-load" latency --url "http://127.0.0.1:$p" --sessions "$sessions" --rate "$rate" \
    --duration "$duration" --quiet >"$logs/bff-load.txt"
  inputs=$(($(sum bff_inputs_total) - inputs0))
  forwarded=$(($(sum bff_cluster_inputs_owned_elsewhere_total) - forwarded0))
  share=$(awk -v f="$forwarded" -v i="$inputs" 'BEGIN { printf "%.2f %%", i ? 100 * f / i : 0 }')
  printf '%-28s %8d %10d %9s\n' "$cfg" "$inputs" "$forwarded" "$share"
  kill -TERM $cluster
  wait $cluster 2>/dev/null || true
  echo "  (bff-load report and cluster logs: $logs)" >&2
done
