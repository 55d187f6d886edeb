#!/usr/bin/env python3
"""What one round trip costs an idle Redis, and what the commit script adds (issue 20, round 14).

Issue 20 asks for <= 30 us of Redis CPU per input at 2,000 inputs/s. This measures the floor under that
figure on this host: a redis-server of its own (on REDIS_CPU) gets RATE calls a second, paced, one at a
time on one connection (as a node's loop has one commit call in flight per master), from this client (on
CLIENT_CPU), for DURATION seconds each:

  ping         PING: the round trip alone (Redis wakes, reads, answers, sleeps)
  empty        EVALSHA of `return 1` with one key: the round trip of a script call
  commit xK    EVALSHA of the commit script `bff` runs (read from SessionScripts.swift), K input commits of
               K sessions per call (one event each, a 200-byte state, a channel), RATE / K calls a second:
               the same inputs, K to a call, as group commit or a commit window batch them

and prints Redis's CPU per input from /proc (user + system: what Redis's process was charged, including
its system calls), the calls per second reached, and Redis's own time per call (`INFO commandstats`).
Each commit's answer is checked (its inputSeq, no error). The figures move with the host's load; the
probes run in turn, ROUNDS times, so compare them within one run.

Usage: bench/redis-floor.py [SessionScripts.swift]
Environment: RATE (2000 inputs/s), DURATION (10 s per probe), BATCHES ("1 2 4 8"), SESSIONS (200),
ROUNDS (1), REDIS_CPU (0), CLIENT_CPU (1; both ignored on a host with fewer CPUs).
Needs redis-server.
"""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_wire import commit_script, encode, free_port, reply  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "Sources/ClusterRedis/SessionScripts.swift")
try:
    RATE = float(os.environ.get("RATE", "2000"))
    DURATION = float(os.environ.get("DURATION", "10"))
    BATCHES = [int(b) for b in os.environ.get("BATCHES", "1 2 4 8").split()]
    SESSIONS = int(os.environ.get("SESSIONS", "200"))
    ROUNDS = int(os.environ.get("ROUNDS", "1"))
    REDIS_CPU = int(os.environ.get("REDIS_CPU", "0"))
    CLIENT_CPU = int(os.environ.get("CLIENT_CPU", "1"))
except ValueError as e:
    sys.exit(f"bench-redis-floor: {e}")
if RATE <= 0 or DURATION <= 0 or SESSIONS < 1 or ROUNDS < 1 or any(b < 1 or b > SESSIONS for b in BATCHES):
    sys.exit("bench-redis-floor: RATE, DURATION, ROUNDS must be positive; each batch between 1 and SESSIONS")
SCRIPT = commit_script(SOURCE)
if not SCRIPT:
    sys.exit(f"bench-redis-floor: no commitMany script in {SOURCE}")
HZ = os.sysconf("SC_CLK_TCK")
PINNED = (os.cpu_count() or 1) > max(REDIS_CPU, CLIENT_CPU)


def log(message):
    print(f"bench-redis-floor: {message}", file=sys.stderr, flush=True)


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


class Redis:
    def __init__(self):
        port = free_port()
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        if PINNED:
            argv = ["taskset", "-c", str(REDIS_CPU)] + argv
        self.server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                self.conn = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("bench-redis-floor: redis-server did not start")
        self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.conn.makefile("rb")
        # taskset execs redis-server in its own process: the pid stays.
        self.pid = self.server.pid

    def command(self, *args):
        self.conn.sendall(encode(*args))
        return reply(self.f)

    def stop(self):
        try:
            self.command("SHUTDOWN", "NOSAVE")
        except (RuntimeError, OSError):
            pass  # the connection closes as Redis exits
        self.server.wait(timeout=30)


def evalsha_usec_per_call(redis):
    for line in redis.command("INFO", "commandstats").decode().splitlines():
        if line.startswith("cmdstat_evalsha:"):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return float(fields["usec_per_call"])
    return None


def paced(redis, name, inputs_per_call, make_call, check):
    """Sends RATE / inputs_per_call calls a second for DURATION, one at a time; returns a result row."""
    calls = max(1, int(RATE * DURATION / inputs_per_call))
    interval = inputs_per_call / RATE
    redis.command("CONFIG", "RESETSTAT")
    cpu0 = cpu_seconds(redis.pid)
    start = time.monotonic()
    for i in range(calls):
        delay = start + i * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        redis.conn.sendall(make_call(i))
        check(i, reply(redis.f))
    elapsed = time.monotonic() - start
    cpu = cpu_seconds(redis.pid) - cpu0
    inputs = calls * inputs_per_call
    return {"probe": name, "inputs": inputs, "calls_per_s": calls / elapsed, "inputs_per_s": inputs / elapsed,
            "us_per_input": cpu / inputs * 1e6, "us_per_call": cpu / calls * 1e6,
            "evalsha_us_per_call": evalsha_usec_per_call(redis)}


def main():
    if PINNED:
        os.sched_setaffinity(0, {CLIENT_CPU})
    redis = Redis()
    try:
        empty = redis.command("SCRIPT", "LOAD", "return 1").decode()
        sha = redis.command("SCRIPT", "LOAD", SCRIPT).decode()
        sessions = [f"bff:s:{{floor{n}}}" for n in range(SESSIONS)]
        for s in sessions:
            redis.command("HSET", s, "state", "x", "seq", "0", "inputSeq", "0", "fence", "1")
            redis.command("EXPIRE", s, 1860)
        state = "s" * 200
        acknowledged = {s: 0 for s in sessions}
        ping = encode("PING")
        empty_call = encode("EVALSHA", empty, 1, "bff:s:{floor0}")

        def commit_call(k):
            def make(i):
                batch = [sessions[(i * k + j) % SESSIONS] for j in range(k)]
                args = ["256", "1860", "300", str(k)]
                for s in batch:
                    event = '{"viewModel":"greeting","data":{"label":"Hello, n%d!"}}' % acknowledged[s]
                    args += [s, s + ":ev", s + ":idem:", "1", state, "1", "0", s + ":ch", "0", "1", event]
                return encode("EVALSHA", sha, 1, batch[0], *args)

            def check(i, answer):
                batch = [sessions[(i * k + j) % SESSIONS] for j in range(k)]
                if not isinstance(answer, list) or len(answer) != k:
                    sys.exit(f"bench-redis-floor: call {i} answered {answer!r}")
                for s, a in zip(batch, answer):
                    if not isinstance(a, list) or int(a[0]) != acknowledged[s] + 1:
                        sys.exit(f"bench-redis-floor: commit of {s} answered {a!r}")
                    acknowledged[s] += 1
            return make, check

        def expect(value):
            def check(i, answer):
                if answer != value:
                    sys.exit(f"bench-redis-floor: call {i} answered {answer!r}")
            return check

        rows = []
        for r in range(ROUNDS):
            probes = [("ping", 1, lambda i: ping, expect(b"PONG")),
                      ("empty", 1, lambda i: empty_call, expect(b"1"))]
            probes += [(f"commit x{k}", k, *commit_call(k)) for k in BATCHES]
            for name, k, make, check in probes:
                log(f"round {r + 1}: {name} at {RATE:.0f} inputs/s for {DURATION:.0f} s")
                rows.append(paced(redis, name, k, make, check))
    finally:
        redis.stop()
    pins = f"Redis on CPU {REDIS_CPU}, client on CPU {CLIENT_CPU}" if PINNED else "unpinned"
    print(f"Redis CPU per input at {RATE:.0f} inputs/s, one call in flight ({pins}; {os.path.relpath(SOURCE)}):")
    print(f"{'probe':<11} {'inputs/s':>9} {'calls/s':>8} {'us/call':>8} {'us/input':>9} {'EVALSHA us/call':>16}")
    for row in rows:
        usec = row["evalsha_us_per_call"]
        print(f"{row['probe']:<11} {row['inputs_per_s']:>9.0f} {row['calls_per_s']:>8.0f} {row['us_per_call']:>8.1f} "
              f"{row['us_per_input']:>9.1f} {'-' if usec is None else f'{usec:.1f}':>16}")


main()
