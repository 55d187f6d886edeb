#!/usr/bin/env bash
# A local bff cluster from Debian's packages: redis-server, three bff nodes (cluster mode) and HAProxy
# in front, running deploy/haproxy.cfg (consistent hash of the session id, /readyz checks).
#   scripts/cluster.sh            then http://127.0.0.1:8080/ ; Ctrl-C stops everything
# Env: PORT (HAProxy, 8080), STATS_PORT (HAProxy's stats page, 8404), NODE_BASE_PORT (8091: nodes on
# 8091-8093), REDIS_PORT (6390), BFF_BIN_DIR (default: `swift build`'s debug folder, built first),
# GITHUB_TOKEN (passed to the nodes).
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-8080}
stats_port=${STATS_PORT:-8404}
base=${NODE_BASE_PORT:-8091}
redis_port=${REDIS_PORT:-6390}
bin=${BFF_BIN_DIR:-}
if [ -z "$bin" ]; then
  swift build --product bff >/dev/null
  bin=$(swift build --show-bin-path)
fi
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --maxmemory-policy noeviction \
  --daemonize no >"$dir/redis.log" 2>&1 &
pids+=($!)
for i in 1 2 3; do
  env -u PORT "$bin/bff" --port $((base + i - 1)) --redis-url "redis://127.0.0.1:$redis_port" --node-id "node$i" \
    --cache-file none >"$dir/node$i.log" 2>&1 &
  pids+=($!)
done

# The shipped deploy/haproxy.cfg itself, its addresses from the environment (see its header).
BFF_NODE1=127.0.0.1:$base BFF_NODE2=127.0.0.1:$((base + 1)) BFF_NODE3=127.0.0.1:$((base + 2)) \
  HAPROXY_BIND=127.0.0.1:$port HAPROXY_STATS_BIND=127.0.0.1:$stats_port \
  haproxy -q -f deploy/haproxy.cfg >"$dir/haproxy.log" 2>&1 &
pids+=($!)
echo "bff cluster: http://127.0.0.1:$port/ (stats :$stats_port, nodes 127.0.0.1:$base-$((base + 2)), Redis :$redis_port, logs in $dir)"
wait -n "${pids[@]}" || true
echo "a process of the cluster exited; stopping (logs were in $dir)" >&2
