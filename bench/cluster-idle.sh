#!/usr/bin/env bash
# What idle sessions cost a cluster node and Redis (issue 12): one redis-server and one bff node
# (--threads 1) on CPU 0, N sessions created on the node and left alone, then, once their first lease
# renewals are under way, SECONDS seconds of: EVALSHA, SET and all Redis calls per second (INFO
# commandstats; a command a script runs counts too) and the CPU
# of Redis and of the node (/proc, user + system). Nothing streams and nothing is posted: what remains
# is the upkeep of the leases (renewed every TTL/3) and the loops' timers.
#
# Usage: bench/cluster-idle.sh [SESSIONS (10000)] [SECONDS (10)]
# Environment: BFF (a release bff binary; default: built with swift build -c release), OUT
# (artifacts/bench), IDLE_MASTERS (1; 3 or more: a Redis Cluster of that many masters, no replicas, the
# node on redis+cluster://, EVALSHA calls and Redis CPU summed over the masters). Prints one line; the
# node's log stays in $OUT/idle-node-server.log.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SESSIONS="${1:-10000}"
SECONDS_MEASURED="${2:-10}"
OUT="${OUT:-$ROOT/artifacts/bench}"
BENCH_NAME=bench-cluster-idle
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh" # log, require_tools, free_ports, cpu_ticks_of, start_server (stopped at exit)
require_tools redis-server redis-cli curl python3
mkdir -p "$OUT"

if [[ -z "${BFF:-}" ]]; then
    log "building bff (release)"
    swift build -c release --product bff > "$OUT/idle-build.log" 2>&1 || { tail -30 "$OUT/idle-build.log" >&2; exit 1; }
    BFF="$(swift build -c release --show-bin-path)/bff"
fi

MASTERS="${IDLE_MASTERS:-1}"
ACKS=()
read -r NODE_PORT <<< "$(free_ports 1)"
if [[ $MASTERS == 1 ]]; then
    read -r -a REDIS_PORTS <<< "$(free_ports 1)"
else # a cluster node's bus port is its port + 10000: ports below 55536 whose bus ports are free too
    read -r -a REDIS_PORTS <<< "$(python3 - "$MASTERS" << 'EOF'
import random, socket, sys
def free(p):
    with socket.socket() as s:
        try: s.bind(("127.0.0.1", p)); return True
        except OSError: return False
ports = set()
while len(ports) < int(sys.argv[1]):
    p = random.randint(20000, 45000)
    if free(p) and free(p + 10000): ports.add(p)
print(" ".join(map(str, ports)))
EOF
)"
fi
REDIS_PIDS=()
CLUSTER_DIR="$(mktemp -d)"
trap 'stop_servers; rm -rf "$CLUSTER_DIR"' EXIT
for port in "${REDIS_PORTS[@]}"; do
    REDIS_PORT=$port
    redis_ready() { redis-cli -p "$REDIS_PORT" ping > /dev/null 2>&1; }
    if [[ $MASTERS == 1 ]]; then
        start_server idle-redis redis_ready redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no
    else
        start_server "idle-redis-$port" redis_ready redis-server --port "$port" --bind 127.0.0.1 --save '' \
            --appendonly no --cluster-enabled yes --cluster-config-file "$CLUSTER_DIR/nodes-$port.conf"
    fi
    REDIS_PIDS+=("${PIDS[-1]}")
done
if [[ $MASTERS == 1 ]]; then
    REDIS_URL="redis://127.0.0.1:${REDIS_PORTS[0]}"
else
    redis-cli --cluster create "${REDIS_PORTS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
        > "$OUT/idle-cluster-create.log" 2>&1 || { cat "$OUT/idle-cluster-create.log" >&2; exit 1; }
    for ((i = 0; i < 100; i++)); do
        redis-cli -p "${REDIS_PORTS[0]}" cluster info | grep -q cluster_state:ok && break
        sleep 0.1
    done
    REDIS_URL="redis+cluster://$(printf '127.0.0.1:%s,' "${REDIS_PORTS[@]}")"
    REDIS_URL="${REDIS_URL%,}"
    ACKS=(--redis-replica-acks 0) # no replicas here (a redis+cluster:// URL asks for one by default)
fi
node_ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$NODE_PORT/readyz") == 200 ]]; }
GITHUB_API_URL=http://127.0.0.1:9 start_server idle-node node_ready "$BFF" --port "$NODE_PORT" --threads 1 \
    --cache-file none --log-level warning --redis-url "$REDIS_URL" --node-id idle \
    --max-sessions $((SESSIONS + 100)) "${ACKS[@]}"
NODE_PID="${PIDS[-1]}"

log "creating $SESSIONS sessions"
"${CLIENT_PIN[@]}" python3 - "$NODE_PORT" "$SESSIONS" << 'EOF'
import http.client, sys, time
# 10 sessions per client address (127.0.x.y; all of 127/8 is loopback), within the per-client limit
c = None
for i in range(int(sys.argv[2])):
    if i % 10 == 0:
        k = i // 10
        c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10,
                                       source_address=(f"127.0.{1 + k // 250}.{2 + k % 250}", 0))
    for attempt in range(50):  # 503 + Retry-After while the node's Redis connections settle
        c.request("POST", "/api/sessions"); r = c.getresponse(); body = r.read()
        if r.status != 503: break
        time.sleep(0.1)
    if r.status != 201: sys.exit(f"create {i} answered {r.status}: {body[:200]}")
EOF
# The first renewals come 0.5-1 TTL/3 after each creation (10 s TTL: within 3.4 s).
sleep 4
calls_of() { # calls of command $1 (all: every command but INFO, those run inside scripts included), summed over the masters
    local port sum=0 n
    for port in "${REDIS_PORTS[@]}"; do
        n=$(redis-cli -p "$port" info commandstats | awk -F'[=,:]' -v c="$1" '
            $1 ~ /^cmdstat_/ && $1 != "cmdstat_info" && (c == "all" || $1 == "cmdstat_" c) { s += $3 } END { print s + 0 }')
        sum=$((sum + ${n:-0}))
    done
    echo "$sum"
}
redis_ticks() { # summed over the masters
    local pid sum=0
    for pid in "${REDIS_PIDS[@]}"; do sum=$((sum + $(cpu_ticks_of "$pid"))); done
    echo "$sum"
}
r0=$(redis_ticks); n0=$(cpu_ticks_of "$NODE_PID"); e0=$(calls_of evalsha); s0=$(calls_of set); a0=$(calls_of all)
sleep "$SECONDS_MEASURED"
r1=$(redis_ticks); n1=$(cpu_ticks_of "$NODE_PID"); e1=$(calls_of evalsha); s1=$(calls_of set); a1=$(calls_of all)
tick=$(getconf CLK_TCK)
python3 - "$SESSIONS" "$SECONDS_MEASURED" "$tick" "$((e1 - e0))" "$((r1 - r0))" "$((n1 - n0))" "$MASTERS" \
    "$((s1 - s0))" "$((a1 - a0))" << 'EOF'
import sys
n, s, tick, calls, redis, node, masters, sets, every = map(int, sys.argv[1:])
where = "one Redis" if masters == 1 else f"a Redis Cluster of {masters} masters"
print(f"{n} idle sessions on {where}, {s} s: EVALSHA {calls / s:.0f}/s, SET {sets / s:.0f}/s, every command "
      f"{every / s:.0f}/s (those inside scripts included); CPU: redis-server {redis / tick / s * 100:.1f} %, "
      f"bff {node / tick / s * 100:.1f} % (of one core)")
EOF
