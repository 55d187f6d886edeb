#!/usr/bin/env bash
# A status broadcast's CPU per stream, on one cluster node (issue 20: a broadcast to 6 x 17,000 streams
# within 1 s on this 2-core host needs each node's share small). One redis-server, one bff node (--threads 1,
# --test-hooks, its default flags otherwise) holding STREAMS streams opened by `bff-load streams`, then
# BROADCASTS status changes through the test hook, one a second; the node's CPU (/proc) over that time minus
# its CPU over as long without broadcasts (lease renewals, stream checks) is the broadcasts' cost. Prints
# that per stream and broadcast, for each BIN given (alternated ROUNDS times: builds compared in one run),
# and the same for the `bff-load` process reading the events (the clients share this host's two cores).
#
# Usage: bench/broadcast-cpu.sh [BIN...]   (folders with release bff and bff-load; default
#        .build/release)
# Environment: BC_STREAMS (17000) BC_BROADCASTS (10) BC_ROUNDS (1) BC_OUT (a temp folder)
#              BC_READ_BATCH (0: the loader's --read-batch, seconds)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STREAMS=${BC_STREAMS:-17000}
BROADCASTS=${BC_BROADCASTS:-10}
ROUNDS=${BC_ROUNDS:-1}
OUT=${BC_OUT:-$(mktemp -d)}
READ_BATCH=${BC_READ_BATCH:-0}
mkdir -p "$OUT"
BENCH_NAME=bench-broadcast-cpu
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-cli curl python3
BINS=("$@")
[[ ${#BINS[@]} -gt 0 ]] || BINS=("$ROOT/.build/release")
for bin in "${BINS[@]}"; do
    [[ -x $bin/bff && -x $bin/bff-load ]] || { log "no release bff and bff-load in $bin"; exit 1; }
done
read -r REDIS_PORT PORT < <(free_ports 2)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no > "$OUT/redis.log" 2>&1 &
PIDS+=($!)
for ((i = 0; i < 100; i++)); do redis-cli -p "$REDIS_PORT" ping > /dev/null 2>&1 && break; sleep 0.05; done
URL=http://127.0.0.1:$PORT

open_streams() { curl -fsS "$URL/metrics" 2> /dev/null | awk '/^http_open_streams /{print int($2)}'; }
post() {
    curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' -d "$1" "$URL/api/_test/status" \
        || { log "the test hook refused the broadcast"; exit 1; }
}

measure() { # bin
    local bin=$1 node load i t0 t1 t2 l0 l1 l2
    redis-cli -p "$REDIS_PORT" flushall > /dev/null
    "$bin/bff" --port "$PORT" --threads 1 --cache-file none --log-level warning --test-hooks \
        --redis-url "redis://127.0.0.1:$REDIS_PORT/0" > "$OUT/node.log" 2>&1 &
    node=$!
    for ((i = 0; i < 100; i++)); do curl -fsS "$URL/readyz" > /dev/null 2>&1 && break; sleep 0.1; done
    # held long enough for the measurement; from client addresses of their own (per-client limits)
    "$bin/bff-load" streams --url "$URL" --streams "$STREAMS" --concurrency 100 \
        --hold $((2 * BROADCASTS + 60)) --source 127.0.1.1-127.0.4.250 --read-batch "$READ_BATCH" --quiet > "$OUT/load.txt" 2>&1 &
    load=$!
    for ((i = 0; i < 300; i++)); do
        [[ $(open_streams || echo 0) -ge $STREAMS ]] && break
        sleep 1
    done
    [[ $(open_streams || echo 0) -ge $STREAMS ]] || { log "$STREAMS streams did not open"; exit 1; }
    sleep 2
    t0=$(cpu_ticks_of "$node")
    l0=$(cpu_ticks_of "$load")
    for ((i = 0; i < BROADCASTS; i += 2)); do
        post '{"reachable":false,"message":"broadcast '"$i"'"}'
        sleep 1
        post '{"reachable":true,"message":null}'
        sleep 1
    done
    t1=$(cpu_ticks_of "$node")
    l1=$(cpu_ticks_of "$load")
    sleep $((2 * ((BROADCASTS + 1) / 2)))
    t2=$(cpu_ticks_of "$node")
    l2=$(cpu_ticks_of "$load")
    kill "$load" 2> /dev/null || true
    kill "$node"
    wait "$node" 2> /dev/null || true
    wait "$load" 2> /dev/null || true
    python3 - "$bin" "$t0" "$t1" "$t2" "$l0" "$l1" "$l2" "$(getconf CLK_TCK)" "$STREAMS" \
        "$((2 * ((BROADCASTS + 1) / 2)))" << 'PY'
import sys
bin, t0, t1, t2, l0, l1, l2, hz, streams, n = sys.argv[1], *map(int, sys.argv[2:])
busy, idle = (t1 - t0) / hz, (t2 - t1) / hz
lbusy, lidle = (l1 - l0) / hz, (l2 - l1) / hz
print(f"{bin}: {n} broadcasts to {streams} streams: node CPU {busy:.2f} s, {idle:.2f} s as long without; "
      f"{(busy - idle) / n / streams * 1e6:.2f} us per stream and broadcast; the loader reading them "
      f"{lbusy:.2f} s, {lidle:.2f} s without: {(lbusy - lidle) / n / streams * 1e6:.2f} us per event")
PY
}

for ((r = 0; r < ROUNDS; r++)); do
    for bin in "${BINS[@]}"; do measure "$bin"; done
done
