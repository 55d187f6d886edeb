#!/usr/bin/env bash
# Redis that fails over and shards (issue 24), same run, same machine, release builds:
#   1. latency: input -> event latency (`bff-load latency`: sessions created and inputs posted on node 1,
#      streams on node 2) and Redis CPU per input (`INFO cpu` of every Redis process, its idle rate taken
#      out) on three deployments, each with --redis-replica-acks 0 and 1, in alternating rounds:
#        one        redis://: one redis-server (with a replica, which N = 1 needs)
#        cluster    redis+cluster://: a Redis Cluster of 3 masters and 3 replicas
#        sentinel   redis+sentinel://: a master, a replica and 3 sentinels
#      Redis CPU is given per input for the masters together, and per shard (each master alone): on a
#      cluster each master runs the commands of its own sessions only;
#   2. failover: HA_TRIALS trials of `kill -9` of a master (cluster: the master of one session's shard;
#      sentinel: the master), with HA_FAILOVER_SESSIONS sessions on node 1 and a stream for each on
#      node 2: Redis's own failover time (a live node's CLUSTER SLOTS / the sentinels name the new master),
#      the time until every session of the failed shard acknowledges an input again (posted every 20 ms
#      with the same Idempotency-Key until 202), and until every one of their streams has delivered that
#      input's event. The killed node is started again (as a replica) as soon as Redis failed it over:
#      with one replica ack and one replica per master a shard acknowledges only once its new master
#      has a replica (docs/CLUSTER.md). Sessions on the other shards post too: their errors are counted.
# Prints a summary (also $OUT/ha-summary.txt); the JSON of every run stays in $OUT. Fails (exit 1) if an
# input is lost or answered with an error in the latency runs, or an acknowledged input's inputSeq is not
# the next one in the failover trials.
# bff and redis-server run on CPU 0, the load on CPU 1 (when there are 2 CPUs and taskset).
#
# Usage: bench/redis-ha.sh
# Environment (all optional): HA_ROUNDS (2) HA_SESSIONS (200) HA_RATE (1000) HA_DURATION (10)
#   HA_TRIALS (20) HA_FAILOVER_SESSIONS (30) HA_OUT (artifacts/bench) HA_BIN (release bff and bff-load:
#   skips the build) HA_SKIP (any of "latency failover")
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
OUT="${HA_OUT:-$ROOT/artifacts/bench}"
BENCH_NAME=bench-redis-ha
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"  # log, require_tools, SERVER_PIN, CLIENT_PIN
require_tools redis-server redis-cli python3
mkdir -p "$OUT"

if [[ -n "${HA_BIN:-}" ]]; then
    BIN="$HA_BIN"
else
    log "building bff and bff-load (release)"
    for product in bff bff-load; do
        swift build -c release --product "$product" > "$OUT/ha-build-$product.log" 2>&1 \
            || { tail -30 "$OUT/ha-build-$product.log" >&2; log "swift build failed"; exit 1; }
    done
    BIN="$(swift build -c release --show-bin-path)"
fi
trap - EXIT  # the driver stops what it starts
export HA_BIN="$BIN" HA_OUT="$OUT" HA_SERVER_PIN="${SERVER_PIN[*]}" HA_CLIENT_PIN="${CLIENT_PIN[*]}"
exec python3 "$ROOT/bench/redis_ha.py"
