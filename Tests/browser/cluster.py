"""A real cluster for the browser tests: one `redis-server` and three `bff --redis-url` nodes (a, b, c).

Each node is a `ServerProcess` (conftest.py) on a fixed port, so a node killed with `kill -9` can be
started again on its old address. The lease TTL is short (LEASE_TTL seconds) so that a test sees the
whole of a failover: while the dead owner's lease lasts, inputs at the other nodes are answered `503`
+ `Retry-After`; after it, the next node that needs the session takes it over with its state.
"""

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

from support import free_port

LEASE_TTL = 5


class RedisServer:
    """`redis-server` on a free loopback port, no persistence; stop() kills it."""

    def __init__(self, logs):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._log = open(logs / f"redis-{self.port}.log", "wb")
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no"], stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError("redis-server did not answer PING")

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log.close()


class Cluster:
    """Redis and the nodes `a`, `b`, `c` (attributes and `nodes[name]`), with HTTP helpers."""

    def __init__(self, binary, github_url, logs, make_server):
        self._binary, self._github_url, self._logs, self._make_server = binary, github_url, logs, make_server
        self.redis = None
        self.nodes = {}

    def start(self):
        self._logs.mkdir(parents=True, exist_ok=True)
        self.redis = RedisServer(self._logs)
        for name in ("a", "b", "c"):
            node = self._make_server(
                self._binary, self._github_url, name=f"cluster-{name}",
                extra_args=["--redis-url", self.redis.url, "--node-id", name, "--lease-ttl", str(LEASE_TTL)])
            node.start()
            self.nodes[name] = node
            setattr(self, name, node)

    def stop(self):
        for node in self.nodes.values():
            node.stop()
        if self.redis:
            self.redis.stop()

    def live_nodes(self):
        return [node for node in self.nodes.values() if node.process is not None]

    # MARK: HTTP

    def create_session(self, node):
        """A session created at `node`, which then owns it (holds its lease)."""
        status, _, body = request("POST", f"{node.url}/api/sessions")
        assert status == 201, (status, body)
        return body["id"]

    def state(self, session_id, via=None):
        """`GET /state` of the session at `via` (default: the first live node): (status, snapshot)."""
        node = via or self.live_nodes()[0]
        status, _, body = request("GET", f"{node.url}/api/sessions/{session_id}/state")
        return status, body

    def delete_session(self, session_id, via, timeout=LEASE_TTL + 10):
        """`DELETE`s the session at `via`, again after each `503` (the owner is dead until its lease
        expires); returns the answers seen, the last being `204`."""
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            status, headers, _ = request("DELETE", f"{via.url}/api/sessions/{session_id}")
            seen.append(status)
            if status == 204:
                return seen
            assert status == 503, f"only 503 while the owner is dead, got {status}"
            time.sleep(0.2)
        raise TimeoutError(f"the session was not deleted within {timeout} s: {seen}")


def request(method, url, body=None, headers=None, timeout=10):
    """One HTTP request: (status, headers, parsed JSON body or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, response.headers, _json(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, _json(error.read())


def _json(raw):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
