#!/usr/bin/env bash
# Input-to-output latency of bff against a minimal C evhttp program doing the greeting subset of the
# contract (bench/c-greeting.c), measured by the same `bff-load latency` in the same run: both
# servers pinned to CPU 0 (one thread each), the load tool pinned to CPU 1, RUNS rounds alternating
# C and bff. Prints every run, the median p50/p99 of each, and the ratios bff/C. Alternating in one
# run spreads the machine's own stalls (bench/hiccup.c measures them) over both servers.
#
# Usage: bench/latency.sh [extra bff-load latency flags, e.g. --busy-poll]
# Environment (all optional): LAT_RUNS (default 3), LAT_SESSIONS (200), LAT_RATE (2000),
#   LAT_DURATION (10), LAT_C_PORT (18190), LAT_SWIFT_PORT (18191), LAT_OUT (artifacts/bench-latency),
#   LAT_BIN (a folder with release builds of bff and bff-load, to skip the build)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
RUNS="${LAT_RUNS:-3}"
SESSIONS="${LAT_SESSIONS:-200}"
RATE="${LAT_RATE:-2000}"
DURATION="${LAT_DURATION:-10}"
C_PORT="${LAT_C_PORT:-18190}"
SWIFT_PORT="${LAT_SWIFT_PORT:-18191}"
OUT="${LAT_OUT:-$ROOT/artifacts/bench-latency}"
EXTRA=("$@")
mkdir -p "$OUT"

BENCH_NAME=bench-latency
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

require_tools cc curl pkg-config python3
build_c c-greeting
if [[ -n "${LAT_BIN:-}" ]]; then
    BIN="$LAT_BIN"
else
    log "building bff and bff-load (release)"
    for product in bff bff-load; do
        swift build -c release --product "$product" > "$OUT/swift-build-$product.log" 2>&1 \
            || { tail -30 "$OUT/swift-build-$product.log" >&2; log "swift build failed"; exit 1; }
    done
    BIN="$(swift build -c release --show-bin-path)"
fi

creates_sessions() { curl -fsS --max-time 1 -X POST "http://127.0.0.1:$READY_PORT/api/sessions" > /dev/null 2>&1; }

READY_PORT=$C_PORT
start_server c creates_sessions "$OUT/c-greeting" "$C_PORT"
READY_PORT=$SWIFT_PORT
start_server swift creates_sessions "$BIN/bff" --port "$SWIFT_PORT" --threads 1 --cache-file none --log-level warning
port_of() { if [[ $1 == c ]]; then echo "$C_PORT"; else echo "$SWIFT_PORT"; fi; }

log "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews the figures)"
for ((run = 1; run <= RUNS; run++)); do
    for name in c swift; do
        file="$OUT/run-$run-$name.json"
        "${CLIENT_PIN[@]}" "$BIN/bff-load" latency --url "http://127.0.0.1:$(port_of "$name")" --sessions "$SESSIONS" \
            --rate "$RATE" --duration "$DURATION" --quiet --json "${EXTRA[@]}" > "$file"
        log "run $run/$RUNS $name: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); l=r["latency"]
print("p50 %.0f us  p99 %.0f us  p99.9 %.0f us  lost %d  errors %d" % (l["p50Us"], l["p99Us"], l["p99_9Us"], r["lost"], r["errors"]))' "$file")"
    done
done

python3 - "$OUT" "$RUNS" "${EXTRA[*]:-}" << 'EOF' | tee "$OUT/summary.txt"
import json, statistics, sys
out, runs, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print(f"bff-load latency {extra}; servers on CPU 0, load on CPU 1; median of {runs} runs")
medians = {}
for name in ("c", "swift"):
    reports = [json.load(open(f"{out}/run-{i}-{name}.json")) for i in range(1, runs + 1)]
    p50s = [r["latency"]["p50Us"] for r in reports]
    p99s = [r["latency"]["p99Us"] for r in reports]
    lost = sum(r["lost"] + r["errors"] for r in reports)
    medians[name] = (statistics.median(p50s), statistics.median(p99s))
    print(f"{name:6s} p50 runs: {' '.join(f'{v:.0f}' for v in p50s)}  p99 runs: {' '.join(f'{v:.0f}' for v in p99s)}"
          f"  median p50 {medians[name][0]:.0f} us, p99 {medians[name][1]:.0f} us; lost+errors {lost}")
print(f"ratio swift/c: p50 {medians['swift'][0] / medians['c'][0]:.2f}, p99 {medians['swift'][1] / medians['c'][1]:.2f}")
EOF
