#!/usr/bin/env bash
# What a session's Idempotency-Keys hold in the heap, and whether it is given back once their window
# passed (issue 20, round 19): one release `bff` (single process, default flags, `--threads 1`) under
# massif; `bff-load latency --idempotency-keys` (SESSIONS sessions, RATE keyed inputs a second for DURATION
# s, the sessions kept); a detailed snapshot right after the load, another once the 300 s window and a
# sweep (5 s) have passed. Prints both heaps and the difference per session and per key. The browser sends
# a key of 32 hex characters with every input; `bff-load` sends "load-N" (up to 10 characters, inline in a
# Swift string): a browser's key costs a heap string more.
# Needs valgrind (vgdb), curl, objcopy, python3 and release builds (BIN).
# Usage: bench/massif-keys.sh     Environment: BIN (.build/release), SESSIONS (200), RATE (200), DURATION (50),
#                                   WAIT (315), OUT (artifacts/massif-keys)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$ROOT/.build/release}"
SESSIONS="${SESSIONS:-200}"
RATE="${RATE:-200}"
DURATION="${DURATION:-50}"
WAIT="${WAIT:-315}"
OUT="${OUT:-$ROOT/artifacts/massif-keys}"
BENCH_NAME=massif-keys
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
require_tools valgrind vgdb curl objcopy python3
SERVER_PIN=()  # heap contents do not depend on where a process runs
mkdir -p "$OUT"
rm -f "$OUT"/massif.out* "$OUT"/*.ms
objcopy --strip-debug "$BIN/bff" "$OUT/bff-nodebug"  # valgrind cannot read Swift release debug info
export GITHUB_API_URL=http://127.0.0.1:9  # no GitHub: nothing here searches

READY_PORT=""
node_ready() { curl -sf "http://127.0.0.1:$READY_PORT/readyz" > /dev/null; }
read -r nport <<< "$(free_ports 1)"
READY_PORT=$nport
start_server node node_ready valgrind --tool=massif --massif-out-file="$OUT/massif.out" --threshold=0.3 \
    --depth=40 "$OUT/bff-nodebug" --port "$nport" --threads 1 --cache-file none --log-level warning
node_pid=${PIDS[-1]}
heap() { # the heap (useful + malloc's own) of a detailed snapshot
    awk -F= '/^mem_heap_B=/{u=$2} /^mem_heap_extra_B=/{e=$2} END{print u + e}' "$1"
}

log "$SESSIONS sessions, $RATE keyed inputs/s for $DURATION s"
"$BIN/bff-load" latency --url "http://127.0.0.1:$nport" --sessions "$SESSIONS" --rate "$RATE" \
    --duration "$DURATION" --idempotency-keys --keep-sessions --quiet --json > "$OUT/load.json"
python3 - "$OUT/load.json" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if d["lost"] or d["errors"] or d["accepted"] != d["sent"]:
    sys.exit(f"massif-keys: inputs lost or refused: {d}")
PY
vgdb --pid="$node_pid" detailed_snapshot "$OUT/after-load.ms" > /dev/null 2>&1 || { log "vgdb failed"; exit 1; }
log "waiting $WAIT s: the keys' window (300 s) and a sweep"
sleep "$WAIT"
vgdb --pid="$node_pid" detailed_snapshot "$OUT/after-window.ms" > /dev/null 2>&1 || { log "vgdb failed"; exit 1; }
a=$(heap "$OUT/after-load.ms")
b=$(heap "$OUT/after-window.ms")
keys=$((RATE * DURATION))
echo "massif-keys: heap after the load $a B, after the window $b B: $(((a - b) / SESSIONS)) B per session," \
    "$(((a - b) / keys)) B per key given back ($keys keys, $SESSIONS sessions kept)"
