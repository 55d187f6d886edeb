#!/usr/bin/env bash
# What idle streamed sessions cost Redis and a cluster node (issue 20, round 13): one redis-server and one
# bff node (release, default flags but --test-hooks off), STREAMS sessions each with one open stream from
# `bff-load streams` (held open), then, once every stream is open, SECONDS seconds of nothing but upkeep:
# the leases' renewals and the periodic checks of the streamed sessions. Prints Redis's EVALSHA calls per
# second, Redis's and the node's CPU (% of a core, /proc), Redis's CPU per streamed session, and every
# command Redis ran in the window (calls and time, those inside scripts too).
#
# Usage: bench/streamed-idle.sh [STREAMS (10000)] [SECONDS (20)]
# Environment: BIN (folder with release bff and bff-load; default .build/release), OUT (a temp folder)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STREAMS=${1:-10000}
SECONDS_MEASURED=${2:-20}
BIN=${BIN:-.build/release}
OUT=${OUT:-$(mktemp -d)}
BENCH_NAME=bench-streamed-idle
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-cli curl python3
mkdir -p "$OUT"
read -r rport nport < <(free_ports 2)
redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no > "$OUT/redis.log" 2>&1 &
redis_pid=$!
PIDS+=("$redis_pid")
for _ in $(seq 50); do redis-cli -p "$rport" ping > /dev/null 2>&1 && break; sleep 0.1; done
"$BIN/bff" --port "$nport" --redis-url "redis://127.0.0.1:$rport" --node-id n1 --cache-file none \
    --log-level warning > "$OUT/node.log" 2>&1 &
node_pid=$!
PIDS+=("$node_pid")
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$nport/readyz" > /dev/null && break; sleep 0.1; done
hold=$((SECONDS_MEASURED + 120))
"$BIN/bff-load" streams --url "http://127.0.0.1:$nport" --streams "$STREAMS" --hold "$hold" --concurrency 200 \
    --source 127.0.3.1-127.0.3.250 --quiet --json > "$OUT/load.json" 2> "$OUT/load.err" &
loader=$!
PIDS+=("$loader")
open_streams() { curl -fs "http://127.0.0.1:$nport/metrics" | awk '/^bff_open_event_streams /{print int($2)}'; }
for _ in $(seq 1200); do
    [[ $(open_streams) -ge $STREAMS ]] && break
    kill -0 "$loader" 2> /dev/null || { log "the loader ended: $(tail -3 "$OUT/load.err")"; exit 1; }
    sleep 0.1
done
[[ $(open_streams) -ge $STREAMS ]] || { log "only $(open_streams) of $STREAMS streams opened"; exit 1; }
log "$STREAMS streams open; settling 12 s (a whole check interval), then measuring $SECONDS_MEASURED s"
sleep 12
evalsha() { redis-cli -p "$rport" INFO commandstats | awk -F'[=,]' '/^cmdstat_evalsha:/{print $2}'; }
redis-cli -p "$rport" CONFIG RESETSTAT > /dev/null  # the commands of the measured window only (below)
e0=$(evalsha)
r0=$(cpu_ticks_of "$redis_pid")
n0=$(cpu_ticks_of "$node_pid")
sleep "$SECONDS_MEASURED"  # the measured window itself
e1=$(evalsha)
redis-cli -p "$rport" INFO commandstats > "$OUT/commandstats.txt"
r1=$(cpu_ticks_of "$redis_pid")
n1=$(cpu_ticks_of "$node_pid")
hz=$(getconf CLK_TCK)
python3 - "$STREAMS" "$SECONDS_MEASURED" "$((e1 - e0))" "$((r1 - r0))" "$((n1 - n0))" "$hz" << 'PY'
import sys
streams, seconds, calls, rticks, nticks, hz = (int(x) for x in sys.argv[1:])
redis = rticks / hz / seconds
node = nticks / hz / seconds
print(f"{streams} idle streamed sessions: {calls / seconds:,.0f} EVALSHA/s; Redis {redis * 100:.1f} % of a core "
      f"({redis * 1e6 / streams:.2f} us per session per second); node {node * 100:.1f} %")
PY
# Every command Redis ran in the window, those inside scripts too: calls and Redis's time.
awk -F'[:=,]' -v s="$SECONDS_MEASURED" '/^cmdstat_/ && $1 != "cmdstat_info" && $1 != "cmdstat_config|resetstat" {
    printf "  %-26s %8d calls  %8.0f ms in %s s\n", substr($1, 9), $3, $5 / 1000, s }' "$OUT/commandstats.txt"

