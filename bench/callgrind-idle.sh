#!/usr/bin/env bash
# What idle streamed sessions cost a cluster node, in instructions (issue 20, round 16): one redis-server,
# one release `bff` node (default flags) under callgrind, STREAMS sessions each with one open stream
# (`bff-load streams`, held), then, once every stream is open and a check interval has passed, SECONDS s
# of nothing but upkeep (lease renewals, the periodic checks of streamed sessions, subscriber health,
# keep-alives) counted (callgrind_control zeroes the counters, then dumps them). Prints the node's
# instructions per streamed session per second. Unlike CPU time (`bench/streamed-idle.sh`), the
# count does not depend on what else the host runs.
# PLACEMENT: owner (created and streamed on the measured node, which runs the sessions: it renews their
# leases, its streams are fed by its own commits) or cross (created on a second node, not measured, which
# runs them; the measured node only streams them: subscriptions and stream checks, no leases).
# Needs valgrind, redis-server, curl and release builds of bff and bff-load (BIN).
# Usage: bench/callgrind-idle.sh     Environment: BIN (.build/release), PLACEMENT (owner), STREAMS (2000),
#                                      SECONDS_MEASURED (40), OUT (artifacts/callgrind-idle-PLACEMENT)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$ROOT/.build/release}"
PLACEMENT="${PLACEMENT:-owner}"
STREAMS="${STREAMS:-2000}"
MEASURED="${SECONDS_MEASURED:-40}"
case "$PLACEMENT" in
    owner | cross) OUT="${OUT:-$ROOT/artifacts/callgrind-idle-$PLACEMENT}" ;;
    *) echo "callgrind-idle: PLACEMENT must be owner or cross, not $PLACEMENT" >&2 && exit 2 ;;
esac
BENCH_NAME=callgrind-idle
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
require_tools valgrind redis-server redis-cli curl objcopy callgrind_annotate callgrind_control
SERVER_PIN=()  # instruction counts do not depend on where a process runs
mkdir -p "$OUT"
rm -f "$OUT"/node.out*
# valgrind cannot read the debug info of Swift release builds: a copy without it.
objcopy --strip-debug "$BIN/bff" "$OUT/bff-nodebug"
export GITHUB_API_URL=http://127.0.0.1:9  # no GitHub: nothing here searches

READY_PORT=""
redis_ready() { redis-cli -p "$READY_PORT" ping > /dev/null 2>&1; }
node_ready() { curl -sf "http://127.0.0.1:$READY_PORT/readyz" > /dev/null; }
read -r rport nport oport <<< "$(free_ports 3)"
READY_PORT=$rport
start_server redis redis_ready redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no
common=(--threads 1 --cache-file none --log-level warning --redis-url "redis://127.0.0.1:$rport")
create_url="http://127.0.0.1:$nport"
if [[ $PLACEMENT == cross ]]; then
    READY_PORT=$oport
    # Sessions created here are run here; the measured node only streams them.
    start_server owner node_ready "$BIN/bff" --port "$oport" "${common[@]}" --node-id owner \
        --unused-session-timeout 3600
    create_url="http://127.0.0.1:$oport"
fi
READY_PORT=$nport
start_server node node_ready valgrind --tool=callgrind --callgrind-out-file="$OUT/node.out" "$OUT/bff-nodebug" \
    --port "$nport" "${common[@]}" --node-id measured
node_pid=${PIDS[-1]}

# Streams from 50 client addresses: one address holds at most --max-connections-per-client (256).
"$BIN/bff-load" streams --url "$create_url" --stream-url "http://127.0.0.1:$nport" --streams "$STREAMS" \
    --hold 3600 --concurrency 50 --source 127.0.1.1-127.0.1.50 --keep-sessions --quiet --json \
    > "$OUT/load.json" 2> "$OUT/load.err" &
PIDS+=($!)
log "$STREAMS streams, $PLACEMENT placement: waiting for every stream to open (under valgrind: minutes)"
for ((i = 0; i < 300; i++)); do
    open=$(curl -s -m 10 "http://127.0.0.1:$nport/metrics" | awk '/^http_open_streams /{print int($2)}')
    [[ ${open:-0} -ge $STREAMS ]] && break
    kill -0 "${PIDS[-1]}" 2> /dev/null || { log "bff-load ended early: $(tail -c 400 "$OUT/load.err")"; exit 1; }
    sleep 2
done
[[ ${open:-0} -ge $STREAMS ]] || { log "only ${open:-0} of $STREAMS streams open"; exit 1; }
# One check interval (10 s by default) and a few lease renewals before counting: every kind of upkeep is under way.
log "all open; settling 15 s, then counting $MEASURED s"
sleep 15
callgrind_control -z "$node_pid" > /dev/null 2>&1
sleep "$MEASURED"
callgrind_control -d "$node_pid" > /dev/null 2>&1
dump=$(ls "$OUT"/node.out.*)
total=$(callgrind_annotate "$dump" 2> /dev/null | awk '/PROGRAM TOTALS/{gsub(",", "", $1); print $1}')
echo "callgrind-idle: $PLACEMENT placement, $STREAMS streamed sessions, $MEASURED s: $total instructions," \
    "$((total / MEASURED / STREAMS)) per streamed session per second ($dump)"
