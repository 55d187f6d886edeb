#!/usr/bin/env bash
# GET /api/sessions/{id}/state of bff, started with its DEFAULT flags, against bench/c-greeting.c
# (the smallest single-threaded C evhttp program serving the same route with the same 290 bytes),
# in the same run: each server pinned to CPU 0 (taskset -c 0; bff then sizes itself to that one
# CPU), wrk pinned to CPU 1, one warm-up run per server, then RUNS measured rounds alternating the
# servers. For every run it records req/s (wrk) and the server's own cost per request from
# `perf stat -p PID` while wrk runs: cycles and instructions where the CPU exposes hardware
# counters, CPU time (task-clock) and context switches always. On a VM without a PMU (this
# project's machine: "PMU not available due to virtualization") it also counts instructions per
# request exactly under valgrind's callgrind (deterministic, unaffected by the host's load).
# Prints the medians and the bff/C ratios, and writes everything to $OUT (summary.txt).
#
# Usage: bench/http.sh [--c-only]
# Environment (all optional): BENCH_DURATION (10s), BENCH_WARMUP (5s), BENCH_RUNS (3),
#   BENCH_CONNECTIONS (64), BENCH_C_PORT (18090), BENCH_SWIFT_PORT (18091),
#   BENCH_OUT (artifacts/bench), BENCH_BFF (a bff binary instead of `swift build -c release`),
#   BENCH_BFF_FLAGS (extra bff flags; empty = the defaults), BENCH_CALLGRIND (1 = count
#   instructions with callgrind, 0 = not; default: only when perf has no hardware counters),
#   BENCH_CALLGRIND_REQUESTS (5000: callgrind counts a fixed number of requests, see
#   docs/BENCHMARKS.md "Round 2"; with a fixed duration the count moved with the host's load)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
C_ONLY=0
case "${1:-}" in
    --c-only) C_ONLY=1 ;;
    "") ;;
    *) echo "usage: $0 [--c-only]" >&2; exit 2 ;;
esac
DURATION="${BENCH_DURATION:-10s}"
WARMUP="${BENCH_WARMUP:-5s}"
RUNS="${BENCH_RUNS:-3}"
CONNECTIONS="${BENCH_CONNECTIONS:-64}"
C_PORT="${BENCH_C_PORT:-18090}"
SWIFT_PORT="${BENCH_SWIFT_PORT:-18091}"
OUT="${BENCH_OUT:-$ROOT/artifacts/bench}"
CG_REQUESTS="${BENCH_CALLGRIND_REQUESTS:-5000}"
read -r -a BFF_FLAGS <<< "${BENCH_BFF_FLAGS:-}"
mkdir -p "$OUT"

BENCH_NAME=bench-http
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

# --- tools -------------------------------------------------------------------------------------
if ! command -v wrk > /dev/null 2>&1; then
    log "installing wrk (apt)"
    if [[ $(id -u) -eq 0 ]]; then SUDO=(); else SUDO=(sudo); fi
    "${SUDO[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends wrk > /dev/null
fi
require_tools cc curl pkg-config perf

# Hardware counters, if this CPU (or VM) exposes them; task-clock and context switches always.
PERF_PROBE="$(perf stat -x, -e cycles,instructions true 2>&1 || true)"
if [[ "$PERF_PROBE" == *"not supported"* ]]; then
    HW=0
    EVENTS=task-clock,context-switches
    log "perf: no hardware counters here (cycles/instructions not supported); CPU time per request instead"
else
    HW=1
    EVENTS=cycles,instructions,task-clock,context-switches
fi
CALLGRIND="${BENCH_CALLGRIND:-$((1 - HW))}"
[[ $CALLGRIND -eq 1 ]] && require_tools valgrind callgrind_control objcopy

# --- builds ------------------------------------------------------------------------------------
build_c c-greeting

if [[ $C_ONLY -eq 0 && -n "${BENCH_BFF:-}" ]]; then
    BFF="$BENCH_BFF"
elif [[ $C_ONLY -eq 0 ]]; then
    log "building bff (release)"
    swift build -c release --product bff > "$OUT/swift-build.log" 2>&1 \
        || { tail -30 "$OUT/swift-build.log" >&2; log "swift build failed (see $OUT/swift-build.log)"; exit 1; }
    BFF="$(swift build -c release --show-bin-path)/bff"
fi

# --- servers -----------------------------------------------------------------------------------
READY_PORT=""
answers_healthz() { # the C program has no /healthz: any HTTP answer on READY_PORT will do
    curl -sS --max-time 1 -o /dev/null "http://127.0.0.1:$READY_PORT/" 2> /dev/null
}
declare -A PORT PID_OF SESSION
start_bench_server() { # name port command...
    READY_PORT=$2
    start_server "$1" answers_healthz "${@:3}"
    PORT[$1]=$2
    PID_OF[$1]=${PIDS[-1]}
    local id
    id="$(curl -fsS -XPOST "http://127.0.0.1:$2/api/sessions" | sed -E 's/.*"id":"([^"]+)".*/\1/')"
    SESSION[$1]=$id
    local body
    body="$(curl -fsS "http://127.0.0.1:$2/api/sessions/$id/state")"
    log "$1: pid ${PID_OF[$1]}, session $id, state is ${#body} bytes"
}
url_of() { echo "http://127.0.0.1:${PORT[$1]}/api/sessions/${SESSION[$1]}/state"; }

# One wrk run with perf stat attached to the server. Prints "rps requests cpu_ns ctxsw cycles instr".
run_measured() { # name duration
    local name=$1 duration=$2 stamp wrkfile perffile perfpid
    stamp="$(date +%s%N)"
    wrkfile="$OUT/wrk-$name-$stamp.txt"
    perffile="$OUT/perf-$name-$stamp.txt"
    perf stat -x, -e "$EVENTS" -o "$perffile" -p "${PID_OF[$name]}" &
    perfpid=$!
    "${CLIENT_PIN[@]}" wrk -t1 -c"$CONNECTIONS" -d"$duration" --latency "$(url_of "$name")" > "$wrkfile"
    kill -INT "$perfpid"
    wait "$perfpid" || true
    if grep -q -E "Non-2xx|Socket errors" "$wrkfile"; then
        cat "$wrkfile" >&2
        log "$name: errors during the run (above)"
        exit 1
    fi
    local rps requests
    rps="$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$wrkfile")"
    requests="$(awk '/requests in/ { print $1 }' "$wrkfile")"
    awk -F, -v rps="$rps" -v n="$requests" '
        $3 == "task-clock" { cpu = $1 * 1e6 }      # msec -> ns
        $3 == "context-switches" { cs = $1 }
        $3 == "cycles" { cyc = $1 }
        $3 == "instructions" { ins = $1 }
        END { printf "%s %s %.0f %.3f %.0f %.0f\n", rps, n, cpu / n, cs / n, cyc / n, ins / n }' "$perffile"
}

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

start_bench_server c "$C_PORT" "$OUT/c-greeting" "$C_PORT"
NAMES=(c)
if [[ $C_ONLY -eq 0 ]]; then
    start_bench_server bff "$SWIFT_PORT" "$BFF" --port "$SWIFT_PORT" --cache-file none "${BFF_FLAGS[@]}"
    grep -h -o "threads=[0-9]* threadsReason=[^[]*" "$OUT/bff-server.log" | sed 's/^/bench-http: bff /' >&2 || true
    NAMES+=(bff)
fi

log "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews req/s; CPU per request less)"
for name in "${NAMES[@]}"; do
    log "warm-up $name ($WARMUP)"
    run_measured "$name" "$WARMUP" > /dev/null
done

declare -A RPS CPU CS CYC INS
for ((run = 1; run <= RUNS; run++)); do
    for name in "${NAMES[@]}"; do
        read -r rps _ cpu cs cyc ins < <(run_measured "$name" "$DURATION")
        log "run $run/$RUNS $name: $rps req/s, $cpu CPU-ns/req, $cs context switches/req$([[ $HW -eq 1 ]] && echo ", $cyc cycles/req, $ins instructions/req")"
        RPS[$name]="${RPS[$name]:-} $rps"
        CPU[$name]="${CPU[$name]:-} $cpu"
        CS[$name]="${CS[$name]:-} $cs"
        CYC[$name]="${CYC[$name]:-} $cyc"
        INS[$name]="${INS[$name]:-} $ins"
    done
done
stop_servers
PIDS=()

# --- exact instructions per request under callgrind (no PMU needed) -----------------------------
declare -A CG
callgrind_count() { # name port command...: prints instructions per request
    local name=$1 port=$2 out="$OUT/callgrind-$1.out" wrkfile="$OUT/wrk-callgrind-$1.txt" id ir n
    shift 2
    "${SERVER_PIN[@]}" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "$@" \
        > "$OUT/callgrind-$name-server.log" 2>&1 &
    local vpid=$!
    PIDS+=("$vpid")
    READY_PORT=$port
    local i
    for ((i = 0; i < 300; i++)); do answers_healthz && break; sleep 0.1; done
    id="$(curl -fsS -XPOST "http://127.0.0.1:$port/api/sessions" | sed -E 's/.*"id":"([^"]+)".*/\1/')"
    "${CLIENT_PIN[@]}" wrk -t1 -c4 -d2s "http://127.0.0.1:$port/api/sessions/$id/state" > /dev/null # warm-up
    callgrind_control -i on "$vpid" > /dev/null 2>&1
    # a fixed number of requests: wrk's thread stops after CG_REQUESTS responses (wrk itself still
    # runs its 60 s, as in docs/BENCHMARKS.md "Round 2": the idle rest adds the servers' timers)
    "${CLIENT_PIN[@]}" wrk -t1 -c4 -d60s -s "$OUT/stop-after.lua" "http://127.0.0.1:$port/api/sessions/$id/state" \
        > "$wrkfile"
    callgrind_control -i off "$vpid" > /dev/null 2>&1
    callgrind_control -d "$vpid" > /dev/null 2>&1
    kill "$vpid" 2> /dev/null || true
    wait "$vpid" 2> /dev/null || true
    n="$(awk '/requests in/ { print $1 }' "$wrkfile")"
    if ((n < CG_REQUESTS)); then
        log "$name: only $n of $CG_REQUESTS requests under callgrind (wrk's 60 s ran out)"
        exit 1
    fi
    ir="$(cat "$out"* 2> /dev/null | awk '/^(summary|totals):/ { s += $2 } END { print s }')"
    awk -v ir="$ir" -v n="$CG_REQUESTS" 'BEGIN { printf "%.0f\n", ir / n }'
}
if [[ $CALLGRIND -eq 1 ]]; then
    log "counting instructions per request under callgrind ($CG_REQUESTS requests of wrk -c4 each)"
    cat > "$OUT/stop-after.lua" << LUA
local n = 0
response = function() n = n + 1; if n >= $CG_REQUESTS then wrk.thread:stop() end end
LUA
    CG[c]="$(callgrind_count c "$C_PORT" "$OUT/c-greeting" "$C_PORT")"
    if [[ $C_ONLY -eq 0 ]]; then
        # valgrind 3.19 cannot read the DWARF 5 debug info of Swift binaries: a copy without it
        objcopy --strip-debug "$BFF" "$OUT/bff-nodebug"
        CG[bff]="$(callgrind_count bff "$SWIFT_PORT" "$OUT/bff-nodebug" --port "$SWIFT_PORT" --cache-file none "${BFF_FLAGS[@]}")"
    fi
fi

# --- summary -----------------------------------------------------------------------------------
{
    echo "GET /api/sessions/{id}/state, wrk -t1 -c$CONNECTIONS -d$DURATION; server on CPU 0, wrk on CPU 1; median of $RUNS"
    echo "bff flags: --port $SWIFT_PORT --cache-file none ${BFF_FLAGS[*]:-} (otherwise defaults)"
    printf '%-4s %10s %12s %10s' server req/s CPU-ns/req ctxsw/req
    [[ $HW -eq 1 ]] && printf ' %11s %11s' cycles/req instr/req
    [[ $CALLGRIND -eq 1 ]] && printf ' %16s' callgrind-Ir/req
    printf '   runs (req/s)\n'
    for name in "${NAMES[@]}"; do
        # shellcheck disable=SC2086  # word splitting of the run lists is intended
        printf '%-4s %10s %12s %10s' "$name" "$(median ${RPS[$name]})" "$(median ${CPU[$name]})" "$(median ${CS[$name]})"
        # shellcheck disable=SC2086
        [[ $HW -eq 1 ]] && printf ' %11s %11s' "$(median ${CYC[$name]})" "$(median ${INS[$name]})"
        [[ $CALLGRIND -eq 1 ]] && printf ' %16s' "${CG[$name]}"
        printf '  %s\n' "${RPS[$name]}"
    done
    if [[ $C_ONLY -eq 0 ]]; then
        # shellcheck disable=SC2086
        awk -v b="$(median ${RPS[bff]})" -v c="$(median ${RPS[c]})" 'BEGIN { printf "ratio bff/C req/s: %.2f (target >= 0.9)\n", b / c }'
        # shellcheck disable=SC2086
        awk -v b="$(median ${CPU[bff]})" -v c="$(median ${CPU[c]})" 'BEGIN { printf "ratio C/bff by CPU time per request: %.2f (target >= 0.9; bff uses %.2fx C'"'"'s CPU per request)\n", c / b, b / c }'
        if [[ $HW -eq 1 ]]; then
            # shellcheck disable=SC2086
            awk -v b="$(median ${CYC[bff]})" -v c="$(median ${CYC[c]})" 'BEGIN { printf "ratio C/bff by cycles per request: %.2f (target >= 0.9)\n", c / b }'
            # shellcheck disable=SC2086
            awk -v b="$(median ${INS[bff]})" -v c="$(median ${INS[c]})" 'BEGIN { printf "bff/C instructions per request: %.2f\n", b / c }'
        fi
        if [[ $CALLGRIND -eq 1 ]]; then
            awk -v b="${CG[bff]}" -v c="${CG[c]}" 'BEGIN { printf "bff/C instructions per request (callgrind): %.2f\n", b / c }'
        fi
    fi
} | tee "$OUT/summary.txt"
