#!/usr/bin/env bash
# Issue 21's benchmark: the knee of "users per token" (docs/BENCHMARKS.md, "Users per token") re-measured
# with one abusive client added. In one run, each configuration on a fresh github-sim (the real budget of
# 30 searches a minute, 300 ms per answer) and a fresh bff (release, --threads 1 --cache-file none):
#
#   a) polite:  FS_USERS users of `bff-load search` (the default mix), from 127.0.0.2… (one client each)
#   b) abuser:  the same, plus one client (127.0.0.99) sending uncached stateless searches as fast as its
#               FS_ABUSER_CONNECTIONS connections allow (`bff-load rest --search-share 1 --search-unique`),
#               bff with its default --upstream-client-share 0.5
#   c) no-share: the same abuser, bff with --upstream-client-share 1 (the fair share off: before issue 21)
#   d) alone:   the abuser with nobody else (no users), bff with its default --upstream-client-share 0.5: a
#               client alone may use GitHub's whole window (the share binds only while others ask)
#
# The abuser runs during the warm-up and the measured period, in two parts (FS_WARMUP s, then FS_DURATION
# s) so its counts cover the same measured period as the users'. Prints one line per configuration and
# seed (the users' success rate, searches, rate-limited and failed searches, upstream requests in the
# measured period and in the whole run, the abuser's 2xx/429/503 answers in the measured period) and a summary: the users' pooled success rate
# per configuration and the drop from (a).
#
# Usage: bench/fair-share.sh
# Environment (all optional): FS_USERS (15), FS_WARMUP (60), FS_DURATION (120), FS_SEEDS (42; several:
#   "42 7"), FS_CONFIGS ("polite abuser no-share"; add "alone" for d), FS_ABUSER_CONNECTIONS (3), FS_ABUSER_RATE (0 = closed
#   loop), FS_PORT (18230; uses it and the next), FS_OUT (artifacts/bench-fair-share),
#   FS_BIN (a folder with release builds of bff, bff-load and github-sim, to skip the build).
#   Quick check: FS_WARMUP=10 FS_DURATION=30 bench/fair-share.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
USERS="${FS_USERS:-15}"
WARMUP="${FS_WARMUP:-60}"
DURATION="${FS_DURATION:-120}"
read -ra SEEDS <<< "${FS_SEEDS:-42}"
read -ra CONFIGS <<< "${FS_CONFIGS:-polite abuser no-share}"
ABUSER_CONNECTIONS="${FS_ABUSER_CONNECTIONS:-3}"
ABUSER_RATE="${FS_ABUSER_RATE:-0}"
SIM_PORT="${FS_PORT:-18230}"
BFF_PORT=$((SIM_PORT + 1))
OUT="${FS_OUT:-$ROOT/artifacts/bench-fair-share}"
mkdir -p "$OUT"

BENCH_NAME=bench-fair-share
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

require_tools curl python3
if [[ -n "${FS_BIN:-}" ]]; then
    BIN="$FS_BIN"
else
    log "building bff, bff-load and github-sim (release)"
    for product in bff bff-load github-sim; do # one --product per build: swift build keeps only the last
        swift build -c release --product "$product" > "$OUT/swift-build-$product.log" 2>&1 \
            || { tail -30 "$OUT/swift-build-$product.log" >&2; log "swift build failed"; exit 1; }
    done
    BIN="$(swift build -c release --show-bin-path)"
fi
"$BIN/bff-load" rest --help | grep -q -- --search-unique || { log "$BIN/bff-load has no --search-unique"; exit 1; }

users_end=$((2 + USERS - 1))
((users_end <= 98)) || { log "FS_USERS must be at most 97 (users are 127.0.0.2…, the abuser 127.0.0.99)"; exit 1; }
USER_SOURCES="127.0.0.2-127.0.0.$users_end"
ABUSER_SOURCE=127.0.0.99

sim_ready() { curl -fsS --max-time 1 "http://127.0.0.1:$SIM_PORT/_sim/stats" > /dev/null 2>&1; }
bff_ready() { curl -fsS --max-time 1 "http://127.0.0.1:$BFF_PORT/readyz" > /dev/null 2>&1; }

ABUSER_PID=
stop_all() { # the abuser (its bff-load, then the subshell running it) and the servers
    if [[ -n $ABUSER_PID ]]; then
        pkill -P "$ABUSER_PID" 2> /dev/null || true
        kill "$ABUSER_PID" 2> /dev/null || true
        wait "$ABUSER_PID" 2> /dev/null || true
        ABUSER_PID=
    fi
    stop_servers
    PIDS=()
}
trap stop_all EXIT

abuse() { # label: the abuser's warm-up part, then its measured part (each its own JSON)
    local part seconds
    for part in warmup measured; do
        if [[ $part == warmup ]]; then seconds=$WARMUP; else seconds=$DURATION; fi
        ((seconds > 0)) || continue
        "${CLIENT_PIN[@]}" "$BIN/bff-load" rest --url "http://127.0.0.1:$BFF_PORT" --source "$ABUSER_SOURCE" \
            --search-share 1 --search-unique --connections "$ABUSER_CONNECTIONS" --rate "$ABUSER_RATE" \
            --duration "$seconds" --quiet --json > "$OUT/$1-abuser-$part.json" 2> "$OUT/$1-abuser-$part.err"
    done
}

run_one() { # config seed: one measurement on fresh servers; prints its line
    local config=$1 seed=$2 label="$1-seed$2" share=0.5
    if [[ $config == no-share ]]; then share=1; fi
    start_server "$label-sim" sim_ready "$BIN/github-sim" --port "$SIM_PORT" --rate-limit 30 --latency-ms 300
    start_server "$label-bff" bff_ready "$BIN/bff" --port "$BFF_PORT" --threads 1 --cache-file none \
        --log-level warning --upstream-client-share "$share" --github-api-url "http://127.0.0.1:$SIM_PORT"
    rm -f "$OUT/$label"-abuser-*.json "$OUT/$label-users.json"
    if [[ $config != polite ]]; then
        abuse "$label" &
        ABUSER_PID=$!
    fi
    if [[ $config != alone ]]; then
        "${CLIENT_PIN[@]}" "$BIN/bff-load" search --url "http://127.0.0.1:$BFF_PORT" --source "$USER_SOURCES" \
            --sim-url "http://127.0.0.1:$SIM_PORT" --sessions "$USERS" --warmup "$WARMUP" --duration "$DURATION" \
            --seed "$seed" --quiet --json > "$OUT/$label-users.json" 2> "$OUT/$label-users.err"
    fi
    if [[ -n $ABUSER_PID ]]; then
        wait "$ABUSER_PID"
        ABUSER_PID=
    fi
    curl -fsS "http://127.0.0.1:$SIM_PORT/_sim/stats" > "$OUT/$label-sim-stats.json"
    stop_all
    python3 - "$OUT" "$label" "$config" "$seed" << 'EOF'
import json, os, sys
out, label, config, seed = sys.argv[1:5]
users = os.path.join(out, label + "-users.json")
u = json.load(open(users)) if os.path.exists(users) else None
counts = {}
path = os.path.join(out, label + "-abuser-measured.json")
if os.path.exists(path):
    for item in json.load(open(path)).get("statusCounts", "").split():
        status, n = item.split(":")
        counts[int(status)] = int(n)
sim = json.load(open(os.path.join(out, label + "-sim-stats.json")))
ok = sum(n for s, n in counts.items() if 200 <= s < 300)
abuser = "abuser 2xx %d 429 %d 503 %d" % (ok, counts.get(429, 0), counts.get(503, 0)) if config != "polite" else "no abuser"
if u is None:
    print("%-9s seed %-4s no users (upstream in the whole run %3d)  |  %s" % (config, seed, sim.get("requests", -1), abuser))
else:
    print("%-9s seed %-4s users: success %5.1f %%  searches %4d  rateLimited %4d  failed %3d  upstream %3d (whole run %3d)  |  %s" % (
        config, seed, u["successRate"], u["searches"], u["rateLimited"], u["failed"], u.get("upstreamRequests", -1),
        sim.get("requests", -1), abuser))
EOF
}

log "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine can make searches time out)"
log "$USERS users from $USER_SOURCES, warm-up $WARMUP s, measured $DURATION s; seeds ${SEEDS[*]}; configurations ${CONFIGS[*]}"
: > "$OUT/lines.txt"
for seed in "${SEEDS[@]}"; do
    for config in "${CONFIGS[@]}"; do
        case $config in polite | abuser | no-share | alone) ;; *) log "unknown configuration $config" && exit 1 ;; esac
        run_one "$config" "$seed" > "$OUT/line.txt" # not in a pipe: run_one's servers are this shell's
        cat "$OUT/line.txt" >> "$OUT/lines.txt"
        cat "$OUT/line.txt"
    done
done
log "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$OUT" "${CONFIGS[@]}" << 'EOF'
import glob, json, os, sys
out, configs = sys.argv[1], sys.argv[2:]
pooled = {}
for config in configs:
    shown = searches = 0
    for path in glob.glob(os.path.join(out, config + "-seed*-users.json")):
        u = json.load(open(path))
        shown += u["showedResults"]
        searches += u["searches"]
    if searches:
        pooled[config] = 100.0 * shown / searches
print("summary (users' searches that showed results, pooled over seeds):")
for config in configs:
    if config not in pooled:
        continue
    line = "  %-9s %5.1f %%" % (config, pooled[config])
    if "polite" in pooled and config != "polite":
        a = pooled["polite"]
        line += "   drop from polite %5.1f points (%4.1f %% of polite's rate kept)" % (a - pooled[config], 100 * pooled[config] / a)
    print(line)
if "polite" in pooled and "abuser" in pooled:
    # The abuser's fair share is half of GitHub's window (--upstream-client-share 0.5): the users keep at least
    # half of the budget, so their success rate must keep at least half of what it was without the abuser.
    held = pooled["abuser"] >= 0.5 * pooled["polite"]
    print("target (abuser: users keep >= 50 %% of polite's success rate): %s" % ("holds" if held else "MISSED"))
EOF
