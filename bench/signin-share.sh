#!/usr/bin/env bash
# The share of searches that showed results, all anonymous (one app token) against all signed in (each
# person their own token), with the same query mix, for each number of people in PEOPLE: per run a fresh
# `github-sim` with GitHub's budget (30 searches a minute per token, 300 ms an answer), a fresh release
# `bff` (`--threads 1 --cache-file none`, sign-in on, the simulator as GitHub), WARMUP s not counted (the
# cache starts empty), then DURATION s measured with `bff-load search` (a person acts every 10–30 s);
# signed in, `bff-load` first signs each session's person in through the simulator's authorize form.
# Prints one line per run and writes each report to OUT.
# Usage: bench/signin-share.sh    Environment: BIN (.build/release), PEOPLE ("15 50 150 500"),
#   MODES ("anonymous signed-in"), WARMUP (60), DURATION (120), SEED (42), OUT (artifacts/signin-share)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BIN="${BIN:-$ROOT/.build/release}"
PEOPLE="${PEOPLE:-15 50 150 500}"
MODES="${MODES:-anonymous signed-in}"
WARMUP="${WARMUP:-60}"
DURATION="${DURATION:-120}"
SEED="${SEED:-42}"
OUT="${OUT:-$ROOT/artifacts/signin-share}"
BENCH_NAME=signin-share
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
require_tools curl python3
for b in bff github-sim bff-load; do
    [[ -x "$BIN/$b" ]] || { log "no release $b in $BIN: swift build -c release"; exit 1; }
done

run() { # people mode
    local people=$1 mode=$2 sim_port port flags=() report
    read -r sim_port port < <(free_ports 2)
    PIDS=()
    "${SERVER_PIN[@]}" "$BIN/github-sim" --port "$sim_port" --rate-limit 30 --latency-ms 300 > "$OUT/sim.log" 2>&1 &
    PIDS+=("$!")
    for ((i = 0; i < 100; i++)); do curl -fsS "http://127.0.0.1:$sim_port/_sim/stats" > /dev/null 2>&1 && break; sleep 0.1; done
    rm -rf "$OUT/state"
    GITHUB_CLIENT_ID=sim-client-id GITHUB_CLIENT_SECRET=sim-client-secret \
        GITHUB_WEB_URL="http://127.0.0.1:$sim_port" GITHUB_API_URL="http://127.0.0.1:$sim_port" \
        "${SERVER_PIN[@]}" "$BIN/bff" --port "$port" --threads 1 --cache-file none --log-level warning \
        --state-dir "$OUT/state" --max-sessions-per-client 100000 --client-session-rate 100000 \
        --client-session-burst 100000 --max-connections-per-client 20000 > "$OUT/bff-$people-$mode.log" 2>&1 &
    PIDS+=("$!")
    for ((i = 0; i < 100; i++)); do curl -fsS "http://127.0.0.1:$port/readyz" > /dev/null 2>&1 && break; sleep 0.1; done
    [[ $mode == signed-in ]] && flags=(--signed-in)
    report="$OUT/$people-$mode.json"
    "${CLIENT_PIN[@]}" "$BIN/bff-load" search --url "http://127.0.0.1:$port" --sim-url "http://127.0.0.1:$sim_port" \
        --sessions "$people" --warmup "$WARMUP" --duration "$DURATION" --seed "$SEED" --quiet --json "${flags[@]}" \
        > "$report"
    stop_servers
    python3 - "$report" "$people" "$mode" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def v(k):
    x = d.get(k)
    return x.get("value", x) if isinstance(x, dict) else x
print(f"{sys.argv[2]:>4} people {sys.argv[3]:<10} searches {v('searches'):>5}  showed results "
      f"{v('successRate'):6.1f} %  rateLimited {v('rateLimited'):>4}  failed {v('failed'):>3}  "
      f"upstream {v('upstreamRequests')}")
PY
}

for people in $PEOPLE; do
    for mode in $MODES; do run "$people" "$mode"; done
done
