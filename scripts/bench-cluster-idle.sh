#!/usr/bin/env bash
# What idle sessions cost a cluster node and Redis (issue 12): one redis-server and one bff node
# (--threads 1) on CPU 0, N sessions created on the node and left alone, then, once their first lease
# renewals are under way, SECONDS seconds of: EVALSHA calls per second (INFO commandstats) and the CPU
# of Redis and of the node (/proc, user + system). Nothing streams and nothing is posted: what remains
# is the upkeep of the leases (renewed every TTL/3) and the loops' timers.
#
# Usage: scripts/bench-cluster-idle.sh [SESSIONS (10000)] [SECONDS (10)]
# Environment: BFF (a release bff binary; default: built with swift build -c release), OUT
# (artifacts/bench). Prints one line; the node's log stays in $OUT/idle-node-server.log.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SESSIONS="${1:-10000}"
SECONDS_MEASURED="${2:-10}"
OUT="${OUT:-$ROOT/artifacts/bench}"
BENCH_NAME=bench-cluster-idle
# shellcheck source=scripts/bench-lib.sh
source "$ROOT/scripts/bench-lib.sh" # log, require_tools, free_ports, cpu_ticks_of, start_server (stopped at exit)
require_tools redis-server redis-cli curl python3
mkdir -p "$OUT"

if [[ -z "${BFF:-}" ]]; then
    log "building bff (release)"
    swift build -c release --product bff > "$OUT/idle-build.log" 2>&1 || { tail -30 "$OUT/idle-build.log" >&2; exit 1; }
    BFF="$(swift build -c release --show-bin-path)/bff"
fi

read -r REDIS_PORT NODE_PORT <<< "$(free_ports 2)"
redis_ready() { redis-cli -p "$REDIS_PORT" ping > /dev/null 2>&1; }
node_ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$NODE_PORT/readyz") == 200 ]]; }
start_server idle-redis redis_ready redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no
REDIS_PID="${PIDS[-1]}"
GITHUB_API_URL=http://127.0.0.1:9 start_server idle-node node_ready "$BFF" --port "$NODE_PORT" --threads 1 \
    --cache-file none --log-level warning --redis-url "redis://127.0.0.1:$REDIS_PORT" --node-id idle \
    --max-sessions $((SESSIONS + 100))
NODE_PID="${PIDS[-1]}"

log "creating $SESSIONS sessions"
"${CLIENT_PIN[@]}" python3 - "$NODE_PORT" "$SESSIONS" << 'EOF'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
for i in range(int(sys.argv[2])):
    c.request("POST", "/api/sessions"); r = c.getresponse(); r.read()
    if r.status != 201: sys.exit(f"create {i} answered {r.status}")
EOF
# The first renewals come 0.5-1 TTL/3 after each creation (10 s TTL: within 3.4 s).
sleep 4
evalsha_calls() { redis-cli -p "$REDIS_PORT" info commandstats | awk -F'[=,:]' '/^cmdstat_evalsha:/ {print $3}'; }
r0=$(cpu_ticks_of "$REDIS_PID"); n0=$(cpu_ticks_of "$NODE_PID"); e0=$(evalsha_calls)
sleep "$SECONDS_MEASURED"
r1=$(cpu_ticks_of "$REDIS_PID"); n1=$(cpu_ticks_of "$NODE_PID"); e1=$(evalsha_calls)
tick=$(getconf CLK_TCK)
python3 - "$SESSIONS" "$SECONDS_MEASURED" "$tick" "$((e1 - e0))" "$((r1 - r0))" "$((n1 - n0))" << 'EOF'
import sys
n, s, tick, calls, redis, node = map(int, sys.argv[1:])
print(f"{n} idle sessions, {s} s: EVALSHA {calls / s:.0f}/s; CPU: redis-server {redis / tick / s * 100:.1f} %, "
      f"bff {node / tick / s * 100:.1f} % (of one core)")
EOF
