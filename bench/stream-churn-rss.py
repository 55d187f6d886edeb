#!/usr/bin/env python3
"""Memory per event stream of a running bff, measured as the issue measured it (VmRSS).

Opens and closes event streams one after the other (open, read the snapshot, close) on one session,
or with a session created and deleted around each stream, and prints the server's VmRSS growth per
stream after a warm-up. The leak fixed for issue 10 (item 9) showed as about 300 and 420 bytes per
stream; a sound server shows a few bytes at most. (StreamChurnTests is the test; this is the
reproduction against a real process.)

  bff --port 0 --cache-file none &          # prints its port
  bench/stream-churn-rss.py PORT PID [STREAMS] [--session-per-stream]
"""
import json
import socket
import sys
import time

args = [a for a in sys.argv[1:] if not a.startswith("--")]
port, pid = int(args[0]), int(args[1])
count = int(args[2]) if len(args) > 2 else 5000
per_session = "--session-per-stream" in sys.argv


def request(method, path):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: bff\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def new_session():
    return json.loads(request("POST", "/api/sessions").split(b"\r\n\r\n", 1)[1])["id"]


def read_until(s, data, event):
    while event not in data or data.find(b"\n\n", data.find(event)) < 0:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit(f"the server closed the stream before {event!r}")
        data += chunk
    return data


def one_stream(session):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"GET /api/sessions/{session}/events HTTP/1.1\r\nHost: bff\r\nAccept: text/event-stream\r\n\r\n".encode())
        data = read_until(s, b"", b"event: snapshot")
        if per_session:
            request("DELETE", f"/api/sessions/{session}")
            read_until(s, data, b"event: end")


def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024


shared = None if per_session else new_session()


def churn(n):
    for _ in range(n):
        one_stream(new_session() if per_session else shared)
    time.sleep(1)  # the server sees the last closes asynchronously


churn(500)
before = rss()
churn(count)
after = rss()
kind = "a session per stream" if per_session else "one session"
print(f"{count} streams on {kind}: VmRSS {before} -> {after} bytes, {(after - before) / count:.0f} bytes per stream")
