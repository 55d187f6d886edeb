#!/usr/bin/env python3
"""What a browser's tabs cost the server: memory and file descriptors per user with 1, 4 and 16 tabs,
each tab a session, streamed either one stream per tab (GET /api/sessions/{id}/events, what the page
did before) or one multiplexed stream per browser (GET /api/events?sessions=..., what it does now).

Usage: bench/tabs.py [--bff PATH] [--users N] [--tabs 1,4,16]
  Starts `bff` (default .build/release/bff, its default flags but --port 0 and --cache-file none) once
  per (tabs, mode), creates USERS x TABS sessions (from many loopback addresses, as many users would),
  reads the server's process_resident_memory_bytes, process_open_fds and bff_open_event_streams from
  /metrics, opens the streams (waiting for every snapshot), reads them again, and prints per user:
  bytes of RSS and file descriptors the streams added. Prints a table and writes JSON to $OUT (default
  artifacts/bench/tabs.json).
"""
import argparse, json, os, re, selectors, socket, subprocess, sys, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for name in ("process_resident_memory_bytes", "process_open_fds", "bff_open_event_streams"):
        m = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def create(port, source):
    s = socket.create_connection(("127.0.0.1", port), source_address=(source, 0), timeout=10)
    s.sendall(b"POST /api/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    body = data.split(b"\r\n\r\n", 1)[1]
    return json.loads(body)["id"]


def open_streams(port, paths):
    """Opens one connection per path, waits until each has received a snapshot; returns the sockets."""
    sel = selectors.DefaultSelector()
    socks, pending = [], {}
    for i, path in enumerate(paths):
        s = socket.create_connection(("127.0.0.1", port), source_address=(f"127.0.{2 + i // 250}.{1 + i % 250}", 0))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".encode())
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        socks.append(s)
        pending[i] = (path.count(",") + 1, b"")
    deadline = time.time() + 120
    while pending and time.time() < deadline:
        for key, _ in sel.select(timeout=1):
            i = key.data
            if i not in pending:
                try:
                    key.fileobj.recv(65536)
                except BlockingIOError:
                    pass
                continue
            want, seen = pending[i]
            try:
                chunk = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            seen += chunk
            if seen.count(b"event: snapshot") >= want:
                del pending[i]
            else:
                pending[i] = (want, seen)
    if pending:
        sys.exit(f"{len(pending)} streams got no snapshot within 120 s")
    return sel, socks


def run(bff, users, tabs, mode):
    proc = subprocess.Popen(
        [bff, "--port", "0", "--cache-file", "none"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "GITHUB_API_URL": "http://127.0.0.1:9"})
    try:
        port = None
        for line in proc.stdout:
            m = re.search(r"listening on http://[0-9.]+:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        ids = [[create(port, f"127.1.{u // 250}.{1 + u % 250}") for _ in range(tabs)] for u in range(users)]
        time.sleep(0.5)  # settle: the first /metrics after the creations
        before = metrics(port)
        if mode == "per-tab":
            paths = [f"/api/sessions/{i}/events" for user in ids for i in user]
        else:
            paths = ["/api/events?sessions=" + ",".join(user) for user in ids]
        sel, socks = open_streams(port, paths)
        time.sleep(0.5)
        after = metrics(port)
        for s in socks:
            s.close()
        return {
            "tabs": tabs, "mode": mode, "users": users, "connections": len(paths),
            "streams_open": after["bff_open_event_streams"],
            "rss_per_user": (after["process_resident_memory_bytes"] - before["process_resident_memory_bytes"]) / users,
            "fds_per_user": (after["process_open_fds"] - before["process_open_fds"]) / users,
        }
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def main():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # one socket per stream
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bff", default=os.path.join(ROOT, ".build/release/bff"))
    ap.add_argument("--users", type=int, default=500)
    ap.add_argument("--tabs", default="1,4,16")
    args = ap.parse_args()
    rows = []
    for tabs in [int(t) for t in args.tabs.split(",")]:
        for mode in ("per-tab", "multiplexed"):
            r = run(args.bff, args.users, tabs, mode)
            rows.append(r)
            print(f"{tabs:>3} tabs  {mode:<12} connections {r['connections']:>6}  "
                  f"fds/user {r['fds_per_user']:6.2f}  RSS/user {r['rss_per_user']:9.0f} B", flush=True)
    out = os.environ.get("OUT", os.path.join(ROOT, "artifacts/bench/tabs.json"))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
