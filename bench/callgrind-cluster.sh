#!/usr/bin/env bash
# Instructions per input in a 3-node cluster (issue 12, docs/BENCHMARKS.md round 5; Redis's own count:
# issue 20, round 12): a redis-server and three release `bff` nodes (default flags) under callgrind,
# `bff-load latency` for DURATION s and for 2 x DURATION s; prints each node's and redis-server's marginal
# instructions per input (the difference of the two runs divided by the extra inputs, so start-up and
# session set-up cancel out). Unlike Redis's CPU time, the count does not depend on what else the host runs.
# PLACEMENT: cross (sessions created on node 1, inputs posted to node 2, streams on node 3: every input
# forwarded) or owner (created, posted and streamed on node 1; nodes 2 and 3 idle).
# Needs valgrind, redis-server, curl, python3 and release builds of bff and bff-load (BIN).
# Usage: bench/callgrind-cluster.sh        Environment: BIN (.build/release), RATE (100), DURATION (10),
#                                            PLACEMENT (cross), OUT (artifacts/callgrind-cluster[-owner]),
#                                            KEYS (0; 1: each input with an Idempotency-Key, as the browser sends)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$ROOT/.build/release}"
RATE="${RATE:-100}"
DURATION="${DURATION:-10}"
PLACEMENT="${PLACEMENT:-cross}"
KEY_FLAG=()
[[ "${KEYS:-0}" == 1 ]] && KEY_FLAG=(--idempotency-keys)
case "$PLACEMENT" in
    cross) OUT="${OUT:-$ROOT/artifacts/callgrind-cluster}" ;;
    owner) OUT="${OUT:-$ROOT/artifacts/callgrind-cluster-owner}" ;;
    *) echo "callgrind-cluster: PLACEMENT must be cross or owner, not $PLACEMENT" >&2 && exit 2 ;;
esac
BENCH_NAME=callgrind-cluster
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
require_tools valgrind redis-server redis-cli curl python3 objcopy callgrind_annotate
# Instruction counts do not depend on where a process runs: three nodes under valgrind get both CPUs.
SERVER_PIN=()
mkdir -p "$OUT"
# valgrind cannot read the debug info of Swift release builds: a copy without it.
objcopy --strip-debug "$BIN/bff" "$OUT/bff-nodebug"

READY_PORT=""
redis_ready() { redis-cli -p "$READY_PORT" ping > /dev/null 2>&1; }
node_ready() { curl -sf "http://127.0.0.1:$READY_PORT/readyz" > /dev/null; }

run() { # seconds of load: one redis-server and three nodes under callgrind; their outputs in $OUT/<seconds>/
    local d="$1" rport ports n
    mkdir -p "$OUT/$d"
    read -r rport ports <<< "$(free_ports 4)"
    read -r -a ports <<< "$ports"
    READY_PORT="$rport"
    start_server "$d/redis" redis_ready valgrind --tool=callgrind --callgrind-out-file="$OUT/$d/redis.out" \
        redis-server --port "$rport" --save '' --appendonly no
    for n in 1 2 3; do
        READY_PORT="${ports[n - 1]}"
        start_server "$d/node$n" node_ready \
            valgrind --tool=callgrind --callgrind-out-file="$OUT/$d/node$n.out" "$OUT/bff-nodebug" \
            --port "${ports[n - 1]}" --threads 1 --cache-file none --redis-url "redis://127.0.0.1:$rport" \
            --node-id "node$n"
    done
    log "$d s at $RATE inputs/s, $PLACEMENT placement"
    local post="${ports[1]}" stream="${ports[2]}"
    [[ "$PLACEMENT" == owner ]] && post="${ports[0]}" && stream="${ports[0]}"
    "$BIN/bff-load" latency --url "http://127.0.0.1:${ports[0]}" --post-url "http://127.0.0.1:$post" \
        --stream-url "http://127.0.0.1:$stream" --sessions 200 --rate "$RATE" --duration "$d" --quiet --json "${KEY_FLAG[@]}" \
        > "$OUT/$d/run.json"
    redis-cli -p "$rport" INFO commandstats > "$OUT/$d/commandstats.txt"
    stop_servers  # SIGTERM: each node hands over and exits, and callgrind writes its output
    PIDS=()
    python3 - "$OUT/$d/run.json" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if d["lost"] or d["errors"] or d["received"] != d["sent"]:
    sys.exit(f"callgrind-cluster: inputs lost or failed: {d}")
PY
}
total() { callgrind_annotate "$1" 2> /dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }

run "$DURATION"
run "$((2 * DURATION))"
extra="$(python3 -c "print(round($RATE * $DURATION))")"
sum=0
for n in 1 2 3; do
    a="$(total "$OUT/$DURATION/node$n.out")"
    b="$(total "$OUT/$((2 * DURATION))/node$n.out")"
    per=$(((b - a) / extra))
    sum=$((sum + per))
    case $PLACEMENT/$n in
        cross/1) role="owner (applies the forwarded input)" ;;
        cross/2) role="sender (POST, forward, 202)" ;;
        cross/3) role="stream node" ;;
        owner/1) role="owner (POST, commit, stream)" ;;
        *) role="idle" ;;
    esac
    echo "node$n $role: $per instructions per input"
done
echo "all three nodes: $sum instructions per input ($extra extra inputs, $PLACEMENT placement)"
a="$(total "$OUT/$DURATION/redis.out")"
b="$(total "$OUT/$((2 * DURATION))/redis.out")"
calls() { awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2}' "$OUT/$1/commandstats.txt"; }
echo "redis-server: $(((b - a) / extra)) instructions per input;" \
    "$(python3 -c "print(round(($(calls $((2 * DURATION))) - $(calls "$DURATION")) / $extra, 2))") EVALSHA per input" \
    "(under valgrind the nodes are slow: commits of one loop iteration are batched more often than at full speed)"
