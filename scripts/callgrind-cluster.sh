#!/usr/bin/env bash
# Instructions per forwarded input in a 3-node cluster (issue 12, docs/BENCHMARKS.md round 5): a
# redis-server and three release `bff` nodes under callgrind, `cross` placement (sessions created on
# node 1, inputs posted to node 2, streams on node 3), `bff-load latency` for DURATION s and for
# 2 x DURATION s; prints each node's marginal instructions per input (the difference of the two runs
# divided by the extra inputs, so start-up and session set-up cancel out).
# Needs valgrind, redis-server, curl, python3 and release builds of bff and bff-load (BIN).
# Usage: scripts/callgrind-cluster.sh        Environment: BIN (.build/release), RATE (100), DURATION (10),
#                                                         OUT (artifacts/callgrind-cluster)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$ROOT/.build/release}"
RATE="${RATE:-100}"
DURATION="${DURATION:-10}"
OUT="${OUT:-$ROOT/artifacts/callgrind-cluster}"
for tool in valgrind redis-server curl python3 objcopy callgrind_annotate; do
    command -v "$tool" > /dev/null || { echo "callgrind-cluster: $tool is required" >&2; exit 1; }
done
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2> /dev/null || true; done; }
trap cleanup EXIT
# valgrind cannot read the debug info of Swift release builds: a copy without it.
objcopy --strip-debug "$BIN/bff" "$OUT/bff-nodebug"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # $1 = seconds of load; writes $OUT/<seconds>/
    local d="$1" dir="$OUT/$1" rport nodes=() ports=() n p
    mkdir -p "$dir"
    rport="$(free_port)"
    redis-server --port "$rport" --save '' --appendonly no --loglevel warning > "$dir/redis.log" 2>&1 &
    local rpid=$!
    PIDS+=("$rpid")
    for n in 1 2 3; do
        p="$(free_port)"
        ports+=("$p")
        valgrind --tool=callgrind --callgrind-out-file="$dir/node$n.out" "$OUT/bff-nodebug" --port "$p" \
            --threads 1 --cache-file none --redis-url "redis://127.0.0.1:$rport" --node-id "node$n" \
            > "$dir/node$n.log" 2>&1 &
        nodes+=($!)
        PIDS+=($!)
    done
    for p in "${ports[@]}"; do
        for _ in $(seq 600); do curl -sf "http://127.0.0.1:$p/readyz" > /dev/null && break; sleep 0.1; done
        curl -sf "http://127.0.0.1:$p/readyz" > /dev/null || { echo "callgrind-cluster: node on $p not ready" >&2; exit 1; }
    done
    echo "callgrind-cluster: $d s at $RATE inputs/s" >&2
    "$BIN/bff-load" latency --url "http://127.0.0.1:${ports[0]}" --post-url "http://127.0.0.1:${ports[1]}" \
        --stream-url "http://127.0.0.1:${ports[2]}" --sessions 200 --rate "$RATE" --duration "$d" --quiet --json \
        > "$dir/run.json"
    for p in "${nodes[@]}"; do kill -INT "$p"; done
    for p in "${nodes[@]}"; do wait "$p" || true; done
    kill "$rpid"
    wait "$rpid" 2> /dev/null || true
    python3 - "$dir/run.json" << 'PY'
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
    case $n in 1) role="owner (applies the forwarded input)" ;; 2) role="sender (POST, forward, 202)" ;; 3) role="stream node" ;; esac
    echo "node$n $role: $per instructions per input"
done
echo "all three nodes: $sum instructions per input ($extra extra inputs)"
