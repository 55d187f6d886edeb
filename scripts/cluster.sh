#!/usr/bin/env bash
# A local bff cluster from Debian's packages: redis-server, three bff nodes (cluster mode) and HAProxy
# in front (consistent hash of the session id, /readyz checks; the same rules as deploy/haproxy.cfg).
#   scripts/cluster.sh            then http://127.0.0.1:8080/ ; Ctrl-C stops everything
# Env: PORT (HAProxy, 8080), NODE_BASE_PORT (8091: nodes on 8091-8093), REDIS_PORT (6390),
# BFF_BIN_DIR (default: `swift build`'s debug folder, built first), GITHUB_TOKEN (passed to the nodes).
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-8080}
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

cat >"$dir/haproxy.cfg" <<EOF
global
    log stdout format raw local0
defaults
    mode http
    option redispatch
    retries 2
    retry-on conn-failure
    timeout connect 2s
    timeout http-request 10s
    timeout client 75s
    timeout server 75s
    timeout tunnel 1h
frontend http
    bind 127.0.0.1:$port
    acl session_path path_beg /api/sessions/
    use_backend bff_sessions if session_path
    default_backend bff_any
backend bff_sessions
    balance hash path,field(4,/)
    hash-type consistent
    option httpchk GET /readyz
    http-check expect status 200
    default-server check inter 1s fall 2 rise 2
    server node1 127.0.0.1:$base
    server node2 127.0.0.1:$((base + 1))
    server node3 127.0.0.1:$((base + 2))
backend bff_any
    balance leastconn
    server node1 127.0.0.1:$base track bff_sessions/node1
    server node2 127.0.0.1:$((base + 1)) track bff_sessions/node2
    server node3 127.0.0.1:$((base + 2)) track bff_sessions/node3
EOF
haproxy -q -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
pids+=($!)
echo "bff cluster: http://127.0.0.1:$port/ (nodes 127.0.0.1:$base-$((base + 2)), Redis :$redis_port, logs in $dir)"
wait -n "${pids[@]}" || true
echo "a process of the cluster exited; stopping (logs were in $dir)" >&2
