#!/usr/bin/env bash
# Instructions per greeting input, one process (issue 20's single-process bar, the per-input path: body
# parse, idempotency, rate bucket, reduce, diff, SSE frame, history): the release `bff` with its default
# flags (one thread) and bench/c-greeting.c (the smallest C evhttp program doing the same inputs and
# streams) under callgrind, each driven by the same `bff-load latency` (200 sessions with streams,
# RATE inputs/s) for DURATION and for 2 x DURATION seconds; prints each server's marginal instructions
# per input (the difference of the two runs divided by the extra inputs: start-up and the sessions'
# set-up cancel out) and the ratio C/bff (the bar: >= 0.9). Instruction counts do not depend on the
# host's load, unlike the latency knee itself.
# Needs valgrind, curl, python3, gcc and release builds of bff and bff-load (BIN).
# Usage: bench/callgrind-input.sh     Environment: BIN (.build/release), RATE (500), DURATION (10),
#                                                    OUT (artifacts/callgrind-input)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="${BIN:-$ROOT/.build/release}"
RATE="${RATE:-500}"
DURATION="${DURATION:-10}"
OUT="${OUT:-$ROOT/artifacts/callgrind-input}"
BENCH_NAME=callgrind-input
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
require_tools valgrind curl python3 cc callgrind_annotate
[[ -x "$BIN/bff" && -x "$BIN/bff-load" ]] || { log "no release build in $BIN: swift build -c release"; exit 1; }
build_c c-greeting
# valgrind cannot read the debug info of Swift release builds: a copy without it.
objcopy --strip-debug "$BIN/bff" "$OUT/bff-nodebug"
read -r PORT < <(free_ports 1)
ready() { curl -fsS --max-time 2 -X POST "http://127.0.0.1:$PORT/api/sessions" > /dev/null 2>&1; }

run() { # name seconds command...
    local name=$1 d=$2
    shift 2
    mkdir -p "$OUT/$d"
    PIDS=()
    valgrind --tool=callgrind --callgrind-out-file="$OUT/$d/$name.out" "$@" > "$OUT/$d/$name.log" 2>&1 &
    PIDS+=("$!")
    for ((i = 0; i < 300; i++)); do ready && break; sleep 0.1; done
    log "$name: $d s at $RATE inputs/s"
    "$BIN/bff-load" latency --url "http://127.0.0.1:$PORT" --sessions 200 --rate "$RATE" --duration "$d" \
        --quiet --json > "$OUT/$d/$name.json"
    stop_servers
    python3 - "$OUT/$d/$name.json" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if d["lost"] or d["errors"]:
    sys.exit(f"callgrind-input: inputs lost or failed: {d}")
PY
}
total() { callgrind_annotate "$1" 2> /dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }

for d in "$DURATION" "$((2 * DURATION))"; do
    run c "$d" "$OUT/c-greeting" "$PORT"
    run bff "$d" "$OUT/bff-nodebug" --port "$PORT" --threads 1 --cache-file none --log-level warning
done
extra="$(python3 -c "print(round($RATE * $DURATION))")"
per() { echo $((($(total "$OUT/$((2 * DURATION))/$1.out") - $(total "$OUT/$DURATION/$1.out")) / extra)); }
c=$(per c)
b=$(per bff)
echo "c-greeting: $c instructions per input"
echo "bff: $b instructions per input"
python3 -c "print(f'C/bff: {$c / $b:.2f} (bff uses {$b / $c:.2f}x the instructions of C per input; bar: C/bff >= 0.9)')"
