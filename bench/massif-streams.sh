#!/usr/bin/env bash
# What a streamed session holds in the heap (issue 20, round 18): one release `bff` (default flags,
# `--threads 1`) under massif, STREAMS sessions created on it, each with one open stream (`bff-load
# streams`, held); once every stream is open and a check interval has passed, a detailed snapshot
# (`vgdb … detailed_snapshot`). Prints the heap (useful + malloc's own) per session + stream and the
# largest allocating sites in bff (`bench/massif_sites.py`). Unlike RSS, the figure does not depend on
# the host's other work or on how malloc's arenas were fragmented by the set-up.
# MODE: cluster (one redis-server; the node runs the sessions and feeds their streams from its own
# commits) or single (no Redis: the single-process figure the cluster's is compared with).
# Needs valgrind (vgdb), redis-server, curl, objcopy, swift (demangle) and release builds (BIN).
# Usage: bench/massif-streams.sh     Environment: BIN (.build/release), MODE (cluster), STREAMS (2000),
#                                      OUT (artifacts/massif-streams-MODE)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$ROOT/.build/release}"
MODE="${MODE:-cluster}"
STREAMS="${STREAMS:-2000}"
case "$MODE" in
    cluster | single) OUT="${OUT:-$ROOT/artifacts/massif-streams-$MODE}" ;;
    *) echo "massif-streams: MODE must be cluster or single, not $MODE" >&2 && exit 2 ;;
esac
BENCH_NAME=massif-streams
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
require_tools valgrind vgdb redis-server redis-cli curl objcopy python3 swift
SERVER_PIN=()  # heap contents do not depend on where a process runs
mkdir -p "$OUT"
rm -f "$OUT"/massif.out* "$OUT"/steady.ms
# valgrind cannot read the debug info of Swift release builds: a copy without it.
objcopy --strip-debug "$BIN/bff" "$OUT/bff-nodebug"
export GITHUB_API_URL=http://127.0.0.1:9  # no GitHub: nothing here searches

READY_PORT=""
redis_ready() { redis-cli -p "$READY_PORT" ping > /dev/null 2>&1; }
node_ready() { curl -sf "http://127.0.0.1:$READY_PORT/readyz" > /dev/null; }
read -r rport nport <<< "$(free_ports 2)"
flags=(--threads 1 --cache-file none --log-level warning)
if [[ $MODE == cluster ]]; then
    READY_PORT=$rport
    start_server redis redis_ready redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no
    flags+=(--redis-url "redis://127.0.0.1:$rport" --node-id measured)
fi
READY_PORT=$nport
start_server node node_ready valgrind --tool=massif --massif-out-file="$OUT/massif.out" --threshold=0.3 \
    --depth=40 "$OUT/bff-nodebug" --port "$nport" "${flags[@]}"
node_pid=${PIDS[-1]}

# Streams from 50 client addresses: one address holds at most --max-connections-per-client (256).
"$BIN/bff-load" streams --url "http://127.0.0.1:$nport" --streams "$STREAMS" --hold 3600 --concurrency 50 \
    --source 127.0.1.1-127.0.1.50 --keep-sessions --quiet --json > "$OUT/load.json" 2> "$OUT/load.err" &
PIDS+=($!)
log "$STREAMS streams, $MODE: waiting for every stream to open"
for ((i = 0; i < 300; i++)); do
    open=$(curl -s -m 10 "http://127.0.0.1:$nport/metrics" | awk '/^http_open_streams /{print int($2)}')
    [[ ${open:-0} -ge $STREAMS ]] && break
    kill -0 "${PIDS[-1]}" 2> /dev/null || { log "bff-load ended early: $(tail -c 400 "$OUT/load.err")"; exit 1; }
    sleep 2
done
[[ ${open:-0} -ge $STREAMS ]] || { log "only ${open:-0} of $STREAMS streams open"; exit 1; }
# One check interval (10 s by default) and a few lease renewals: the steady state, not the set-up's peak.
log "all open; settling 15 s, then a detailed snapshot"
sleep 15
vgdb --pid="$node_pid" detailed_snapshot "$OUT/steady.ms" > /dev/null 2>&1 || { log "vgdb failed"; exit 1; }
echo "massif-streams: $MODE, $STREAMS streamed sessions ($OUT/steady.ms)"
python3 "$ROOT/bench/massif_sites.py" "$OUT/steady.ms" "$STREAMS"
