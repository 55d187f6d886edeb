#!/usr/bin/env bash
# What one Redis core holds (issue 20): a cluster node with its default flags on a loopback redis-server
# whose CPU is capped (a cgroup v1 CPU quota on a 10 ms period, longer below 10 %: the kernel takes no quota
# under 1 ms; a capped Redis runs in bursts and stalls up to 9 ms at a time, more below 10 %),
# `bff-load latency` at RATE inputs/s (owner placement: created, posted and streamed on the node),
# once per cap in CAPS. A capped Redis is one that is busy: its answers come later, this node's commits
# meet a batch in flight and go together (group commit), and Redis's cost per input falls. Prints, per
# cap: inputs accepted and lost, latency p50/p99, Redis CPU per input, commits per `EVALSHA`, and the
# node's CPU per input; "Redis holds" is RATE divided by the share of a core Redis used: the inputs per
# second one Redis core takes at that cost.
#
# Usage: bench/redis-capacity.sh          (root, for the cgroup; "none" alone runs without it)
# Environment: RC_BIN (folder with release bff and bff-load; default .build/release) RC_RATE (2000)
#              RC_SESSIONS (200) RC_DURATION (10) RC_CAPS ("none 30 15 10": % of one core)
#              RC_OUT (a temp folder) RC_NODE_FLAGS (extra bff flags, word-split) RC_LOAD_FLAGS (extra
#              `bff-load latency` flags, word-split: e.g. "--connections 64", more inputs in flight at once)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BIN=${RC_BIN:-.build/release}
RATE=${RC_RATE:-2000}
SESSIONS=${RC_SESSIONS:-200}
DURATION=${RC_DURATION:-10}
CAPS=${RC_CAPS:-none 30 15 10}
OUT=${RC_OUT:-$(mktemp -d)}
BENCH_NAME=bench-redis-capacity
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-cli curl python3
mkdir -p "$OUT"
CGROUP=/sys/fs/cgroup/cpu/bff-bench-redis-capacity
cleanup() {
    stop_servers
    [[ -d $CGROUP ]] && rmdir "$CGROUP" 2> /dev/null || true
}
trap cleanup EXIT

READY_PORT=""
redis_ready() { redis-cli -p "$READY_PORT" ping > /dev/null 2>&1; }
node_ready() { curl -sf "http://127.0.0.1:$READY_PORT/readyz" > /dev/null; }
hz=$(getconf CLK_TCK)

run() { # cap (% of a core, or none)
    local cap=$1 rport nport redis_pid node_pid r0 r1 n0 n1
    # Redis on CPU 0 with the client, the node alone on CPU 1. A port free a moment ago may be taken when
    # Redis binds it (a previous benchmark's connections leave their ports closing): a few tries.
    for attempt in 1 2 3 4 5; do
        read -r rport nport < <(free_ports 2)
        taskset -c 0 redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no \
            > "$OUT/redis-$cap.log" 2>&1 &
        redis_pid=$!
        READY_PORT=$rport
        for _ in $(seq 50); do
            redis_ready && break
            kill -0 "$redis_pid" 2> /dev/null || break
            sleep 0.1
        done
        redis_ready && break
        log "redis-server did not start on port $rport (try $attempt): $(tail -1 "$OUT/redis-$cap.log")"
        kill "$redis_pid" 2> /dev/null || true
        [[ $attempt == 5 ]] && exit 1
    done
    PIDS+=("$redis_pid")
    if [[ $cap != none ]]; then
        [[ $EUID -eq 0 && -d /sys/fs/cgroup/cpu ]] || { log "cap $cap% needs root and cgroup v1 cpu; skipped"; return; }
        mkdir -p "$CGROUP"
        local period=$((cap >= 10 ? 10000 : (100000 + cap - 1) / cap))  # a quota of at least 1 ms
        echo "$period" > "$CGROUP/cpu.cfs_period_us"
        echo $((period * cap / 100)) > "$CGROUP/cpu.cfs_quota_us"
        echo "$redis_pid" > "$CGROUP/tasks"
    fi
    READY_PORT=$nport
    # shellcheck disable=SC2086  # extra flags are word-split on purpose (here and for bff-load below)
    taskset -c 1 "$BIN/bff" --port "$nport" --redis-url "redis://127.0.0.1:$rport" --node-id n1 --cache-file none \
        --log-level warning ${RC_NODE_FLAGS:-} > "$OUT/node-$cap.log" 2>&1 &
    node_pid=$!
    PIDS+=("$node_pid")
    for _ in $(seq 100); do node_ready && break; sleep 0.1; done
    node_ready || { log "node did not start: $(tail -3 "$OUT/node-$cap.log")"; exit 1; }
    redis-cli -p "$rport" CONFIG RESETSTAT > /dev/null
    r0=$(cpu_ticks_of "$redis_pid")
    n0=$(cpu_ticks_of "$node_pid")
    # shellcheck disable=SC2086
    "${SERVER_PIN[@]}" "$BIN/bff-load" latency --url "http://127.0.0.1:$nport" --sessions "$SESSIONS" --rate "$RATE" \
        --duration "$DURATION" --quiet --json ${RC_LOAD_FLAGS:-} > "$OUT/run-$cap.json"
    r1=$(cpu_ticks_of "$redis_pid")
    n1=$(cpu_ticks_of "$node_pid")
    redis-cli -p "$rport" INFO commandstats > "$OUT/commandstats-$cap.txt"
    python3 - "$cap" "$OUT/run-$cap.json" "$OUT/commandstats-$cap.txt" "$((r1 - r0))" "$((n1 - n0))" "$hz" "$RATE" \
        "$(grep -c -E 'timed out|connection lost|commit failed|overloaded' "$OUT/node-$cap.log" || true)" << 'PY'
import json, re, sys
cap, run, stats, rticks, nticks, hz, rate, warnings = sys.argv[1:9]
d = json.load(open(run))
inputs = d["accepted"]
calls = {m.group(1): int(m.group(2)) for m in re.finditer(r"cmdstat_(\w+):calls=(\d+)", open(stats).read())}
# Redis's ticks cover the sessions' set-up and deletion too (a few hundred commands): small beside the inputs.
redis_us = int(rticks) / int(hz) * 1e6 / max(inputs, 1)
node_us = int(nticks) / int(hz) * 1e6 / max(inputs, 1)
lat = d.get("latency", {})
per_call = inputs / max(calls.get("evalsha", 0), 1)
share = redis_us * float(rate) / 1e6
print(f"cap {cap:>4}{'%' if cap != 'none' else ' '}: {d['sent']} sent, {inputs} accepted, {d['lost']} lost, "
      f"{d['errors']} errors; latency p50 {lat.get('p50Us', 0) / 1000:.2f} ms p99 {lat.get('p99Us', 0) / 1000:.2f} ms; "
      f"Redis {redis_us:.0f} us per input, {per_call:.1f} commits per EVALSHA, Redis holds "
      f"{float(rate) / share if share else 0:,.0f} inputs/s per core; node {node_us:.0f} us per input; "
      f"{warnings} warnings in the node's log")
PY
    stop_servers
    PIDS=()
    [[ -d $CGROUP ]] && rmdir "$CGROUP" 2> /dev/null || true
}

log "$RATE inputs/s over $SESSIONS sessions for $DURATION s per cap; Redis caps: $CAPS; output in $OUT"
for cap in $CAPS; do run "$cap"; done
