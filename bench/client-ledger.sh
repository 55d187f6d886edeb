#!/usr/bin/env bash
# Redis's cost of a session creation in cluster mode, and the share of it the per-client limits take
# (RedisClientLedger: one script call per creation, a ZREM per end). One Redis, one node:
#   1. N creations through the node (from 200 loopback client addresses, within their limits), then each
#      deleted: Redis's CPU per creation (/proc/PID/stat) and INFO commandstats per command;
#   2. the ledger's reserve script alone, N calls by redis-benchmark with random members: µs per call.
# Usage: bench/client-ledger.sh [creations]   (BFF=path/to/bff, default the release build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BENCH_NAME=bench-client-ledger
N=${1:-4000}
OUT=$(mktemp -d)
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-cli redis-benchmark python3
BFF=${BFF:-.build/release/bff}
[[ -x $BFF ]] || { log "building release"; swift build -c release --product bff > /dev/null; }
read -r RP BP < <(free_ports 2)
redis-server --port "$RP" --save '' --appendonly no --daemonize no > "$OUT/redis.log" 2>&1 &
PIDS+=($!)
REDIS_PID=$!
for _ in $(seq 50); do redis-cli -p "$RP" ping > /dev/null 2>&1 && break; sleep 0.1; done
"$BFF" --port "$BP" --redis-url "redis://127.0.0.1:$RP/0" --cache-file none --log-level warning > "$OUT/bff.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$BP/readyz" > /dev/null && break; sleep 0.1; done
redis-cli -p "$RP" CONFIG RESETSTAT > /dev/null
before=$(cpu_ticks_of "$REDIS_PID")
python3 - "$BP" "$N" << 'PY'
import http.client, json, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
ids = []
for i in range(n):
    src = f"127.0.1.{1 + i % 200}"
    c = http.client.HTTPConnection("127.0.0.1", port, source_address=(src, 0))
    c.request("POST", "/api/sessions")
    r = c.getresponse()
    body = r.read()
    assert r.status == 201, (r.status, body)
    ids.append(json.loads(body)["id"])
    c.close()
c = http.client.HTTPConnection("127.0.0.1", port)
for i in ids:
    c.request("DELETE", f"/api/sessions/{i}")
    r = c.getresponse(); r.read()
    assert r.status == 204, r.status
PY
after=$(cpu_ticks_of "$REDIS_PID")
hz=$(getconf CLK_TCK)
echo "creations and deletes: $N each; redis-server CPU $(( (after - before) * 1000000 / hz / N )) µs per creation + delete"
redis-cli -p "$RP" INFO commandstats | python3 -c '
import re, sys
n = int(sys.argv[1])
rows = [(m[1], int(m[2]), int(m[3])) for m in re.finditer(r"cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)", sys.stdin.read())]
# Commands sent by the node itself (a script'"'"'s time includes the commands it calls, counted apart too).
top = [r for r in rows if r[0] in ("evalsha", "zrem", "ssubscribe", "sunsubscribe", "spublish", "publish")]
print(f"Redis time of the node'"'"'s own commands per creation + delete: {sum(r[2] for r in top) / n:.1f} µs")
for name, calls, usec in sorted(top, key=lambda r: -r[2]):
    print(f"  {name}: {calls / n:.2f} calls, {usec / n:.1f} µs per creation")
' "$N"
sha=$(redis-cli -p "$RP" SCRIPT LOAD "$(python3 - << 'PY'
import re
src = open("Sources/ClusterRedis/ClientLedgerScripts.swift").read()
body = re.search(r'static let reserve = RedisScript\(\s*"""\n(.*?)\n\s*"""\)', src, re.S).group(1)
print("\n".join(l[8:] for l in body.split("\n")))
PY
)")
redis-cli -p "$RP" CONFIG RESETSTAT > /dev/null
redis-benchmark -p "$RP" -n "$N" -c 4 -r 100000 -q EVALSHA "$sha" 2 'b:cl:{x}' 'b:cl:{x}:live' 1000000 1000000 1000000000 \
    s:__rand_int__ 60000 > /dev/null
redis-cli -p "$RP" INFO commandstats | grep -E "cmdstat_evalsha:" |
    sed -E 's/^cmdstat_evalsha:calls=([0-9]+),usec=([0-9]+),usec_per_call=([0-9.]+).*/ledger reserve script alone: \1 calls, \3 µs per call (Redis)/'
