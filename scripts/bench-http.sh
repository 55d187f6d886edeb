#!/usr/bin/env bash
# HTTP throughput of bff's /bench/json route against a minimal C evhttp server serving the same
# bytes (bench/c-baseline.c): each server pinned to CPU 0, wrk pinned to CPU 1, one warm-up run per
# server, then RUNS measured runs alternating the servers. Prints each run, the median req/s of
# each and two ratios:
#   swift/c             against the minimal C program with libevent's default event_base (the
#                       baseline the issue defines);
#   swift/c-changelist  against the same C program with EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST, the
#                       event_base flag bff sets: like for like, what is left is Swift's own cost.
#
# Usage: scripts/bench-http.sh [--c-only]
# Environment (all optional): BENCH_DURATION (default 10s), BENCH_WARMUP (5s), BENCH_RUNS (3),
#   BENCH_CONNECTIONS (64), BENCH_C_PORT (18090), BENCH_SWIFT_PORT (18091), BENCH_CL_PORT (18092),
#   BENCH_OUT (artifacts/bench: binaries, wrk output and summary.txt),
#   BENCH_BFF (a bff binary to use instead of building one with `swift build -c release`)
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
CL_PORT="${BENCH_CL_PORT:-18092}"
OUT="${BENCH_OUT:-$ROOT/artifacts/bench}"
PATH_UNDER_TEST=/bench/json
EXPECTED_BODY='{"ok":true,"service":"bff"}'
mkdir -p "$OUT"

BENCH_NAME=bench-http
# shellcheck source=scripts/bench-lib.sh
source "$ROOT/scripts/bench-lib.sh"

# --- tools -------------------------------------------------------------------------------------
if ! command -v wrk > /dev/null 2>&1; then
    log "installing wrk (apt)"
    if [[ $(id -u) -eq 0 ]]; then SUDO=(); else SUDO=(sudo); fi
    "${SUDO[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends wrk > /dev/null
fi
require_tools cc curl pkg-config

# --- builds ------------------------------------------------------------------------------------
build_c c-baseline

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
answers_expected_body() { # the server on READY_PORT answers the benchmark route with the expected bytes
    local body
    body="$(curl -fsS --max-time 1 "http://127.0.0.1:$READY_PORT$PATH_UNDER_TEST" 2> /dev/null)" || return 1
    [[ "$body" == "$EXPECTED_BODY" ]] && return 0
    log "port $READY_PORT answered $PATH_UNDER_TEST with '$body', expected '$EXPECTED_BODY'"
    exit 1
}
start_bench_server() { # name port command...
    READY_PORT=$2
    start_server "$1" answers_expected_body "${@:3}"
}

run_wrk() { # name port duration -> prints req/s
    local name=$1 port=$2 duration=$3 file
    file="$OUT/wrk-$name-$(date +%s%N).txt"
    "${CLIENT_PIN[@]}" wrk -t1 -c"$CONNECTIONS" -d"$duration" --latency \
        "http://127.0.0.1:$port$PATH_UNDER_TEST" > "$file"
    if grep -q -E "Non-2xx|Socket errors" "$file"; then
        cat "$file" >&2
        log "$name: errors during the run (above)"
        exit 1
    fi
    awk '/^Requests\/sec:/ { printf "%.0f\n", $2 }' "$file"
}

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

start_bench_server c "$C_PORT" "$OUT/c-baseline" "$C_PORT"
start_bench_server c-changelist "$CL_PORT" "$OUT/c-baseline" "$CL_PORT" changelist
NAMES=(c c-changelist)
if [[ $C_ONLY -eq 0 ]]; then
    start_bench_server swift "$SWIFT_PORT" "$BFF" --port "$SWIFT_PORT" --threads 1 --bench-routes --log-level warning --cache-file none
    NAMES+=(swift)
fi
port_of() {
    case $1 in
        c) echo "$C_PORT" ;;
        c-changelist) echo "$CL_PORT" ;;
        *) echo "$SWIFT_PORT" ;;
    esac
}

log "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews the figures)"
for name in "${NAMES[@]}"; do
    log "warm-up $name ($WARMUP)"
    run_wrk "$name" "$(port_of "$name")" "$WARMUP" > /dev/null
done

declare -A RESULTS
for ((run = 1; run <= RUNS; run++)); do
    for name in "${NAMES[@]}"; do
        rps="$(run_wrk "$name" "$(port_of "$name")" "$DURATION")"
        log "run $run/$RUNS $name: $rps req/s"
        RESULTS[$name]="${RESULTS[$name]:-} $rps"
    done
done

{
    echo "wrk -t1 -c$CONNECTIONS -d$DURATION $PATH_UNDER_TEST; server on CPU 0, wrk on CPU 1; median of $RUNS"
    for name in "${NAMES[@]}"; do
        # shellcheck disable=SC2086  # word splitting of the run list is intended
        printf '%-12s runs:%s  median: %s req/s\n' "$name" "${RESULTS[$name]}" "$(median ${RESULTS[$name]})"
    done
    if [[ $C_ONLY -eq 0 ]]; then
        # shellcheck disable=SC2086
        c_median="$(median ${RESULTS[c]})"
        # shellcheck disable=SC2086
        cl_median="$(median ${RESULTS[c-changelist]})"
        # shellcheck disable=SC2086
        swift_median="$(median ${RESULTS[swift]})"
        awk -v s="$swift_median" -v c="$c_median" 'BEGIN { printf "ratio swift/c: %.2f\n", s / c }'
        awk -v s="$swift_median" -v c="$cl_median" 'BEGIN { printf "ratio swift/c-changelist: %.2f (like for like)\n", s / c }'
    fi
} | tee "$OUT/summary.txt"
