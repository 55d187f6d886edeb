#!/usr/bin/env bash
# The cluster at scale (issue 20): NODES bff nodes on one loopback redis-server, each loaded by its own
# `bff-load streams` at once (STREAMS streams per node, CONCURRENCY establishments at a time per node:
# NODES x CONCURRENCY in flight across the cluster), from loopback client addresses of its own
# (127.0.N.1-254 for node N: per-client limits are counted cluster-wide). Each loader holds its streams
# HOLD s, reads its node's RSS, then times a `status` broadcast's fan-out to every stream of that node, and at
# the end deletes its sessions (CONCURRENCY at once). The broadcast (CS_BROADCAST):
#   one   (default) the issue's shape: once every loader holds its streams, this script posts ONE status
#         change to node 1's test hook; every loader times it to each of its streams from that post (one
#         monotonic clock on the host), so "the slowest node" is the last of 102,000 streams to get it
#   each  every loader posts its own broadcast and its reset through its node (rounds 8-12): 6 changes and
#         6 resets, each reaching every stream of the cluster, timed per loader from its own post
# The teardown (CS_TEARDOWN, with CS_BROADCAST=one):
#   together (default) every loader closes its streams and deletes its sessions once every loader has seen
#         the broadcast on all its streams: no loader's teardown (17,000 closes and deletes) runs on the
#         host's 2 cores while another node's broadcast is still being timed
#   each  each loader tears down as soon as its own streams have it (rounds 13-15)
# Prints one line per node and the totals; logs and JSON stay in $OUT.
# Stays within this host's 20,000 open files per process (6 x 17,000 by default).
#
# Usage: bench/cluster-streams.sh
# Environment: CS_NODES (6) CS_STREAMS (17000) CS_CONCURRENCY (100) CS_HOLD (15) CS_BROADCAST (one)
#              CS_BIN (folder with release bff and bff-load; default: build them) CS_OUT (a temp folder)
#              CS_REDIS_NICE (-10 as root, else 0): Redis's nice level. On this 2-core host 12 other
#              processes share the cores with it; in a deployment Redis has a machine of its own, so by
#              default it is put ahead of them (0 = the same footing as the nodes and loaders)
#              CS_IDLE_SAMPLE (5): seconds, once every loader holds its streams and before the broadcast, over
#              which the CPU of the nodes, Redis and the loaders is measured (printed in cores; 0: skipped).
#              The same three are measured from the broadcast's post until every loader has seen it
#              (core-seconds, and per stream: the nodes' writes and the loaders' reads share the 2 cores),
#              with the commands Redis ran meanwhile (calls and time, those inside scripts too)
#              CS_READ_BATCH (0): each loader's --read-batch while it holds its streams: it sleeps this long
#              (e.g. 0.001) after each batch of reads, so a broadcast's events are read in batches, not with a
#              wake-up of the loader per few streams, which on loopback each node's write pays. With 12
#              processes on 2 cores the loaders are seldom asleep to be woken: it changed nothing here
#              (BENCHMARKS.md round 24), unlike one loader and one node (bench-broadcast-cpu.sh)
#              CS_PERF (0): 1 samples node 1 with `perf record -g` over the broadcast ($OUT/perf.data)
#              CS_BUSY (0): processes that burn CPU for the whole run at nice 0, for a host loaded as it was by
#              builds and tests beside the runs where connections were reset (rounds 18-19); reproducible
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NODES=${CS_NODES:-6}
STREAMS=${CS_STREAMS:-17000}
CONCURRENCY=${CS_CONCURRENCY:-100}
HOLD=${CS_HOLD:-15}
READ_BATCH=${CS_READ_BATCH:-0}
BROADCAST=${CS_BROADCAST:-one}
TEARDOWN=${CS_TEARDOWN:-together}
[[ $TEARDOWN == together || $TEARDOWN == each ]] || { echo "CS_TEARDOWN must be together or each" >&2; exit 2; }
[[ $BROADCAST == one || $BROADCAST == each ]] || { echo "CS_BROADCAST must be one or each" >&2; exit 2; }
OUT=${CS_OUT:-$(mktemp -d)}
BENCH_NAME=bench-cluster-streams
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-cli curl python3
mkdir -p "$OUT"
if [[ -n ${CS_BIN:-} ]]; then
    BIN=$CS_BIN
else
    log "building release bff and bff-load"
    swift build -c release --product bff > /dev/null
    swift build -c release --product bff-load > /dev/null
    BIN=.build/release
fi
REDIS_NICE=${CS_REDIS_NICE:-$([[ $EUID -eq 0 ]] && echo -10 || echo 0)}
# A port free a moment ago may be taken when Redis binds it (the previous run's 100,000 connections
# leave their ports closing for a while): a few tries, each with fresh ports.
for attempt in 1 2 3 4 5; do
    read -ra PORTS < <(free_ports $((NODES + 1)))
    RP=${PORTS[0]}
    nice -n "$REDIS_NICE" redis-server --bind 127.0.0.1 --port "$RP" --save '' --appendonly no \
        --maxclients 10000 > "$OUT/redis.log" 2>&1 &
    REDIS_PID=$!
    for _ in $(seq 50); do
        redis-cli -p "$RP" ping > /dev/null 2>&1 && break
        kill -0 "$REDIS_PID" 2> /dev/null || break
        sleep 0.1
    done
    redis-cli -p "$RP" ping > /dev/null 2>&1 && break
    log "redis-server did not start on port $RP (try $attempt): $(tail -1 "$OUT/redis.log")"
    kill "$REDIS_PID" 2> /dev/null || true
    [[ $attempt == 5 ]] && exit 1
done
PIDS+=("$REDIS_PID")
for _ in $(seq 1 "${CS_BUSY:-0}"); do
    bash -c 'while :; do :; done' &
    PIDS+=($!)
done
NODE_PIDS=()
for n in $(seq 1 "$NODES"); do
    # `bff-load streams` creates every session before it opens any stream: at 600 at once the creations take
    # minutes, and with the default --unused-session-timeout (60 s) the first sessions would end as unused
    # (they were taken over again when their streams came, 24,000 per node; since they are deleted, their
    # streams would get 404). A browser opens its stream right after creating its session; the bench
    # measures that, not the unused-session sweep.
    "$BIN/bff" --port "${PORTS[$n]}" --redis-url "redis://127.0.0.1:$RP/0" --node-id "n$n" --test-hooks \
        --cache-file none --log-level warning --unused-session-timeout 3600 > "$OUT/node$n.log" 2>&1 &
    PIDS+=($!)
    NODE_PIDS+=($!)
done
for n in $(seq 1 "$NODES"); do
    for _ in $(seq 100); do curl -fs "http://127.0.0.1:${PORTS[$n]}/readyz" > /dev/null && break; sleep 0.1; done
done
log "$NODES nodes ready; $STREAMS streams each, $CONCURRENCY establishing at a time per node; redis nice $REDIS_NICE; ${CS_BUSY:-0} busy processes; loaders' read batch $READ_BATCH s"
# How busy the host was before the run (PSI: the share of time some task waited for a CPU): a broadcast's
# time is the host's as much as ours, so each run says what it ran on.
[[ -r /proc/pressure/cpu ]] && log "host CPU pressure before the run (avg10, avg60): $(awk '/^some/{print $2, $3}' /proc/pressure/cpu)"
redis-cli -p "$RP" CONFIG RESETSTAT > /dev/null
# Redis's own long events (a command, an expiry cycle, ...) of 100 ms or more, printed at the end: they tell
# a Redis that was busy from one that got no CPU when a node reports a silent connection.
redis-cli -p "$RP" CONFIG SET latency-monitor-threshold 100 > /dev/null
keys_before=$(redis-cli -p "$RP" DBSIZE)
redis_before=$(cpu_ticks_of "$REDIS_PID")
started=$(date +%s.%N)
LOADERS=()
rm -f "$OUT"/ready* "$OUT"/seen* "$OUT/teardown" "$OUT/broadcast-posted-at"
for n in $(seq 1 "$NODES"); do
    observe=()
    [[ $BROADCAST == one ]] && observe=(--broadcast-ready-file "$OUT/ready$n" --broadcast-seen-file "$OUT/seen$n")
    [[ $BROADCAST == one && $TEARDOWN == together ]] && observe+=(--teardown-after-file "$OUT/teardown")
    "$BIN/bff-load" streams --url "http://127.0.0.1:${PORTS[$n]}" --streams "$STREAMS" --hold "$HOLD" "${observe[@]}" \
        --concurrency "$CONCURRENCY" --read-batch "$READ_BATCH" --pid "${NODE_PIDS[$((n - 1))]}" --source "127.0.$n.1-127.0.$n.254" \
        --json --quiet > "$OUT/load$n.json" 2> "$OUT/load$n.err" &
    LOADERS+=($!)
done
if [[ $BROADCAST == one ]]; then
    # Once every loader that is still running holds its streams: one status change, posted to node 1, and
    # its time on the loaders' clock (CLOCK_MONOTONIC); set back after the loaders are done.
    CS_NODE_PIDS="${NODE_PIDS[*]}" CS_REDIS_PID=$REDIS_PID CS_REDIS_PORT=$RP CS_STREAMS_TOTAL=$((NODES * STREAMS)) \
        python3 - "$OUT" "${PORTS[1]}" "${LOADERS[@]}" << 'PY'
import json, os, re, subprocess, sys, time, urllib.request
out, port, loaders = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:]]
nodes, redis = [int(p) for p in os.environ["CS_NODE_PIDS"].split()], int(os.environ["CS_REDIS_PID"])
def alive(pid):
    try: os.kill(pid, 0); return True
    except OSError: return False
def post(body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/_test/status", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    return urllib.request.urlopen(request, timeout=30).status
while not all(os.path.exists(f"{out}/ready{n}") or not alive(pid) for n, pid in enumerate(loaders, 1)):
    time.sleep(0.05)
def ticks(pid):  # CPU time so far (user + system, clock ticks), 0 once the process is gone
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0
# What the held streams cost before the broadcast (CS_IDLE_SAMPLE s; 0: not measured): the CPU a broadcast
# shares the host with. Every stream is open and idle then (keep-alives, stream checks, leases, ledger).
sample = float(os.environ.get("CS_IDLE_SAMPLE", "5"))
if sample > 0:
    groups = {"nodes": nodes, "redis-server": [redis], "loaders": loaders}
    before_ticks, started = {g: sum(ticks(p) for p in ps) for g, ps in groups.items()}, time.monotonic()
    time.sleep(sample)
    elapsed, hz = time.monotonic() - started, os.sysconf("SC_CLK_TCK")
    used = {g: (sum(ticks(p) for p in ps) - before_ticks[g]) / hz / elapsed for g, ps in groups.items()}
    print(f"bench-cluster-streams: idle upkeep over {elapsed:.1f} s with every stream held, in cores: "
          + ", ".join(f"{g} {c:.2f}" for g, c in used.items()) + f"; all {sum(used.values()):.2f} of {os.cpu_count()}",
          file=sys.stderr)
def pressure():  # (µs some task waited for a CPU, monotonic ns), or None without PSI
    try: return int(open("/proc/pressure/cpu").readline().split("total=")[1]), time.monotonic_ns()
    except (OSError, IndexError, ValueError): return None
before = pressure()
def command_stats():  # {command: (calls, µs)} so far
    text = subprocess.run(["redis-cli", "-p", os.environ["CS_REDIS_PORT"], "INFO", "commandstats"],
                          capture_output=True, text=True).stdout
    return {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"cmdstat_(\S+?):calls=(\d+),usec=(\d+)", text)}
stats_at_post = command_stats()
# CS_PERF=1: node 1 sampled by `perf record` (software clock, call graphs) over the broadcast, into $OUT/perf.data.
profiler = None
if os.environ.get("CS_PERF") == "1":
    profiler = subprocess.Popen(["perf", "record", "-F", "4999", "-g", "-p", str(nodes[0]), "-o", f"{out}/perf.data"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
groups = {"nodes": nodes, "redis-server": [redis], "loaders": loaders}
ticks_at_post = {g: sum(ticks(p) for p in ps) for g, ps in groups.items()}
posted_at = time.monotonic_ns()
status = post({"reachable": False, "message": "load-test broadcast"})
open(f"{out}/broadcast-posted-at", "w").write(f"{posted_at}\n")
print(f"bench-cluster-streams: one broadcast posted to node 1 (HTTP {status}) once {len(loaders)} loaders were ready",
      file=sys.stderr)
# Every loader tears down (closes its streams, deletes its sessions) once every loader has seen the broadcast
# on all its streams (or given up), so no teardown takes the CPU a broadcast still being measured needs.
while not all(os.path.exists(f"{out}/seen{n}") or not alive(pid) for n, pid in enumerate(loaders, 1)):
    time.sleep(0.01)
open(f"{out}/teardown", "w").write(f"{time.monotonic_ns()}\n")
after = pressure()
# Who had the CPU from the post until every loader had seen the broadcast (clock ticks: 10 ms each), in
# core-seconds and per stream: the nodes' writes, and the loaders' reads that measure them on the same cores.
spent = {g: (sum(ticks(p) for p in ps) - ticks_at_post[g]) / os.sysconf("SC_CLK_TCK") for g, ps in groups.items()}
streams_total = int(os.environ.get("CS_STREAMS_TOTAL", "0")) or 1
print(f"bench-cluster-streams: CPU from the post until every loader saw it, in core-seconds: "
      + ", ".join(f"{g} {c:.2f}" for g, c in spent.items())
      + f" (per stream: nodes {spent['nodes'] * 1e6 / streams_total:.1f} us, "
      f"loaders {spent['loaders'] * 1e6 / streams_total:.1f} us) over {(time.monotonic_ns() - posted_at) / 1e9:.2f} s",
      file=sys.stderr)
if profiler:
    profiler.send_signal(2)
    profiler.wait()
calls = sorted(((n - stats_at_post.get(name, (0, 0))[0], us - stats_at_post.get(name, (0, 0))[1], name)
                for name, (n, us) in command_stats().items()), key=lambda c: -c[1])
print("bench-cluster-streams: Redis's commands from the post until every loader saw it: "
      + ", ".join(f"{name} {n} ({us / 1000:.0f} ms)" for n, us, name in calls[:8]), file=sys.stderr)
if before and after and after[1] > before[1]:
    share = (after[0] - before[0]) * 1000 / (after[1] - before[1])
    print(f"bench-cluster-streams: host CPU pressure during the broadcast: some task waited for a CPU "
          f"{100 * share:.0f} % of the time", file=sys.stderr)
PY
fi
for pid in "${LOADERS[@]}"; do wait "$pid" || true; done
if [[ $BROADCAST == one ]]; then
    curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' --data '{"reachable":true,"message":null}' \
        "http://127.0.0.1:${PORTS[1]}/api/_test/status" || log "could not set the status back"
fi
ended=$(date +%s.%N)
redis_after=$(cpu_ticks_of "$REDIS_PID")
hz=$(getconf CLK_TCK)
# Every session was deleted at the end (each loader's last phase, CONCURRENCY at once per node): what Redis
# still holds of sessions must be nothing, and its key count back where it was before the run.
session_keys_left=$(redis-cli -p "$RP" --scan --pattern 'bff:s:*' | wc -l)
keys_after=$(redis-cli -p "$RP" DBSIZE)
python3 - "$OUT" "$NODES" "$STREAMS" "$started" "$ended" "$(( (redis_after - redis_before) * 1000 / hz ))" << 'PY'
import json, os, re, sys
out, nodes, streams, started, ended, redis_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
tot_ok = tot_failed = tot_bcast = 0
tot_deleted = tot_delete_failed = tot_delete_retries = 0
slowest_delete = 0.0
worst_bcast = 0.0
# One broadcast (CS_BROADCAST=one): each node's streams timed from that one post, on the loaders' clock.
posted_at = int(open(f"{out}/broadcast-posted-at").read()) if os.path.exists(f"{out}/broadcast-posted-at") else None
for n in range(1, nodes + 1):
    try:
        r = json.load(open(f"{out}/load{n}.json"))
    except Exception as e:
        print(f"node {n}: no result ({e}); stderr: {open(f'{out}/load{n}.err').read()[-300:]}")
        continue
    ok, failed = r.get("succeeded", 0), r.get("failed", 0)
    tot_ok += ok; tot_failed += failed
    est = r.get("establish", {})
    got, all_ms = r.get("broadcastReceived", 0), r.get("broadcastAllReceived")
    if posted_at is not None and "broadcastLastAtNs" in r:
        all_ms = round((r["broadcastLastAtNs"] - posted_at) / 1e6, 1)
    if isinstance(all_ms, (int, float)): worst_bcast = max(worst_bcast, all_ms)
    tot_bcast += got
    log = open(f"{out}/node{n}.log").read()
    warnings = {k: len(re.findall(k, log)) for k in ["timed out", "connection lost", "redis connection down", "redis silent", "Too many common timeouts", "commit failed", "overloaded"]}
    print(f"node {n}: {ok} ok, {failed} failed; establish p50 {est.get('p50Us', 0) / 1000:.0f} ms p99 {est.get('p99Us', 0) / 1000:.0f} ms; "
          f"{r.get('bytesPerSessionStream')} B per session+stream; broadcast reached {got} of {ok} in {all_ms} ms; log: {warnings}")
    if failed: print(f"  failures: {json.dumps({k: v for k, v in r.items() if 'ail' in k and k != 'failed'})[:400]}")
    deleted, delete_failed, dl = r.get("deleted", 0), r.get("deleteFailed", 0), r.get("deleteLatency", {})
    tot_deleted += deleted; tot_delete_failed += delete_failed; tot_delete_retries += r.get("deleteRetries", 0)
    slowest_delete = max(slowest_delete, r.get("deleteSeconds", 0))
    print(f"  deletes: {deleted} of {ok + failed} in {r.get('deleteSeconds', 0):.1f} s, {delete_failed} failed, "
          f"{r.get('deleteRetries', 0)} retried after 503; latency p50 {dl.get('p50Us', 0) / 1000:.0f} ms "
          f"p99 {dl.get('p99Us', 0) / 1000:.0f} ms" + (f"; failures: {r['deleteFailureSamples'][:300]}" if delete_failed else ""))
shape = "one broadcast from its post" if posted_at is not None else "each node's own broadcast"
print(f"total: {tot_ok} of {nodes * streams} streams, {tot_failed} failed, in {ended - started:.1f} s; "
      f"broadcast reached {tot_bcast}; {shape}: the slowest node's last stream after {worst_bcast} ms; "
      f"redis-server CPU {redis_ms} ms")
print(f"deletes: {tot_deleted} of {nodes * streams} sessions, {tot_delete_failed} failed, {tot_delete_retries} retried; "
      f"the slowest node's in {slowest_delete:.1f} s")
PY
echo "redis keys: $keys_before before the run, $keys_after after it; session keys left: $session_keys_left"
# What is left, by kind (a key's {hash tag} folded): e.g. the status board's key, per-client windows that expire.
redis-cli -p "$RP" --scan | sed -E 's/\{[^}]*\}/{…}/; s/:[0-9a-f.:]+$/:…/' | sort | uniq -c | sort -rn | head -5 |
    sed 's/^/redis keys left: /'
redis-cli -p "$RP" INFO commandstats | grep -E "cmdstat_(evalsha|ssubscribe|spublish|publish):" | sed 's/^/redis: /'
# Error replies by kind (a script's own refusal, e.g. a fenced write, counts as a failed call above).
redis-cli -p "$RP" INFO errorstats | grep '^errorstat_' | sed 's/^/redis: /' || true
# Each kind of long event: when it last happened (Unix time), how long it took then and at most (ms).
redis-cli -p "$RP" --csv LATENCY LATEST | sed 's/^/redis latency (event, at, ms, max ms): /' || true
# A node's Redis connection reset ("redis connection down": its TCP path was gone, or silent for ten limits)
# or kept silent ("redis silent": Redis's host acknowledged), with how long, how late its check ran, what TCP saw.
grep -h "no reply for" "$OUT"/node*.log | sed 's/^/node log: /' | head -5 || true
