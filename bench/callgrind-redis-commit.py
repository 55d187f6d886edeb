#!/usr/bin/env python3
"""Redis instructions per commit (issue 20, round 12): what one `commitMany` call of one input commit (one
event, a 200-byte state, a channel to publish on) costs redis-server, counted by callgrind, so the figure
does not depend on what else the host runs (Redis's CPU time in `bench/cluster.sh` does).

A redis-server under callgrind gets N and then, started again, 2 N such calls in a row on one connection
(one session, its history full after the first 256: the steady state of a busy session); the difference
of the two totals divided by N is printed, so start-up, the script's loading and the session's creation
cancel out. The script is read from a SessionScripts.swift (by default this checkout's; give another one,
e.g. `git show REV:Sources/ClusterRedis/SessionScripts.swift > old.swift`, to compare builds).

Usage: bench/callgrind-redis-commit.py [SessionScripts.swift]
Environment: N (1000), RENEW (0: the usual commit, which leaves the expiry as it is; 1: a commit that
renews it, one in a renewal interval). Needs valgrind, callgrind_annotate and redis-server.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_wire import commit_script, encode, free_port, reply  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "Sources/ClusterRedis/SessionScripts.swift")
N = int(os.environ.get("N", "1000"))
RENEW = os.environ.get("RENEW", "0")
if RENEW not in ("0", "1") or N < 1:
    sys.exit("callgrind-redis-commit: RENEW must be 0 or 1 and N at least 1")

SCRIPT = commit_script(SOURCE)
if not SCRIPT:
    sys.exit(f"callgrind-redis-commit: no commitMany script in {SOURCE}")
# Before round 12 a commit had no renewal flag (9 fields before its events, not 10).
HAS_RENEW_FLAG = "a + 10 +" in SCRIPT


def run(calls, out):
    port = free_port()
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "redis-server", "--port", str(port),
         "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                conn = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("callgrind-redis-commit: redis-server did not start")
        f = conn.makefile("rb")

        def command(*args):
            conn.sendall(encode(*args))
            return reply(f)

        sha = command("SCRIPT", "LOAD", SCRIPT).decode()
        session = "bff:s:{bench}"
        command("HSET", session, "state", "x", "seq", "0", "inputSeq", "0", "fence", "1")
        command("EXPIRE", session, 1860)
        state = "s" * 200
        for i in range(calls):
            flag = [RENEW if i > 0 else "1"] if HAS_RENEW_FLAG else []
            event = '{"viewModel":"greeting","data":{"label":"Hello, n%d!"}}' % i
            args = ["256", "1860", "300", "1", session, session + ":ev", session + ":i:", "1", state, "1", "0",
                    session + ":ch"] + flag + ["1", event]
            answer = command("EVALSHA", sha, 1, session, *args)
            if not isinstance(answer, list) or int(answer[0][0]) != i + 1:
                sys.exit(f"callgrind-redis-commit: commit {i + 1} answered {answer!r}")
        try:
            command("SHUTDOWN", "NOSAVE")
        except (RuntimeError, OSError):
            pass  # the connection closes as Redis exits
    finally:
        server.wait(timeout=120)


def total(path):
    text = subprocess.run(["callgrind_annotate", path], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", text).group(1).replace(",", ""))


with tempfile.TemporaryDirectory() as tmp:
    run(N, f"{tmp}/n.out")
    run(2 * N, f"{tmp}/2n.out")
    per = (total(f"{tmp}/2n.out") - total(f"{tmp}/n.out")) // N
print(f"redis-server: {per} instructions per commit call (one input, one event; renews the expiry: "
      f"{'yes' if RENEW == '1' or not HAS_RENEW_FLAG else 'no'}; {os.path.relpath(SOURCE)})")
