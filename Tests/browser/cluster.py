"""A real cluster for the browser tests: one `redis-server` (or a Redis Cluster of three masters with a
replica each, `RedisCluster`) and three `bff --redis-url` nodes (a, b, c).

Each node is a `ServerProcess` (conftest.py) on a fixed port, so a node killed with `kill -9` can be
started again on its old address. The lease TTL is short (LEASE_TTL seconds) so that a test sees the
whole of a failover: while the dead owner's lease lasts, inputs at the other nodes are answered `503`
+ `Retry-After`; after it, the next node that needs the session takes it over with its state.
"""

import json
import random
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

from support import free_port

LEASE_TTL = 5


class RedisServer:
    """`redis-server` on a free loopback port, no persistence; stop() kills it."""

    def __init__(self, logs, extra=(), port=None):
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._log = open(logs / f"redis-{self.port}.log", "wb")
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no", *extra], stdout=self._log, stderr=subprocess.STDOUT)
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
        if not self._log.closed:
            self._log.close()


def _cluster_port():
    """A free loopback port whose cluster bus port (+10000) is free too: Redis Cluster wants both."""
    while True:
        port = random.randrange(20000, 55535)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue


def redis_cli(port, *args, timeout=10):
    """`redis-cli -p port args…`: its output (exit status 0 asserted)."""
    result = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout


class RedisCluster:
    """A real Redis Cluster on loopback: three masters with one replica each, a short node time-out
    (a killed master's replica is promoted in about two seconds). `url` is `redis+cluster://…`."""

    NODE_TIMEOUT_MS = 1000

    def __init__(self, logs, masters=3, replicas=1):
        self._logs = logs
        self.servers = []
        for _ in range(masters * (1 + replicas)):
            # Each node in a directory of its own: its cluster config, and the RDB a replica's full sync
            # writes, must not be read by another node (it would not start empty).
            port = _cluster_port()
            directory = logs / f"redis-cluster-{port}-{uuid.uuid4().hex[:8]}"
            directory.mkdir(parents=True)
            server = RedisServer(logs, port=port, extra=[
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(self.NODE_TIMEOUT_MS), "--dir", str(directory),
                # A replica may always take over (a quiet master leaves its replica's data "old").
                "--cluster-replica-validity-factor", "0"])
            self.servers.append(server)
        ports = [s.port for s in self.servers]
        created = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                                  "--cluster-replicas", str(replicas), "--cluster-yes"],
                                 capture_output=True, text=True, timeout=60)
        if created.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout[-600:]} {created.stderr[-300:]}")
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)
        self.wait_until_healthy()

    def wait_until_healthy(self, timeout=30.0):
        """Until every live node says `cluster_state:ok` and every replica's link to its master is up
        (before that a master has no replica to acknowledge a commit, which a kill would then lose)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live = [s for s in self.servers if s.process.poll() is None]
            replication = [redis_cli(s.port, "INFO", "replication") for s in live]
            if (all("cluster_state:ok" in redis_cli(s.port, "CLUSTER", "INFO") for s in live)
                    and all("role:master" in r or "master_link_status:up" in r for r in replication)):
                return
            time.sleep(0.1)
        raise TimeoutError("the Redis Cluster did not become healthy")

    def master_port(self, key):
        """The port of the live master serving `key`'s slot."""
        slot = int(redis_cli(self.servers[0].port, "CLUSTER", "KEYSLOT", key))
        for server in self.servers:
            if server.process.poll() is not None:
                continue
            for line in redis_cli(server.port, "CLUSTER", "NODES").splitlines():
                fields = line.split()
                if "master" not in fields[2] or "fail" in fields[2]:
                    continue
                for part in fields[8:]:
                    low, _, high = part.partition("-")
                    if low.isdigit() and int(low) <= slot <= int(high or low):
                        return int(fields[1].split("@")[0].rsplit(":", 1)[1])
            break
        raise LookupError(f"no live master serves slot {slot}")

    def kill_master_of(self, key):
        """`kill -9` of the master serving `key`; returns its port."""
        port = self.master_port(key)
        next(s for s in self.servers if s.port == port).stop()
        return port

    def stop(self):
        for server in self.servers:
            server.stop()


class Cluster:
    """Redis and the nodes `a`, `b`, `c` (attributes and `nodes[name]`), with HTTP helpers. `redis` is
    one `redis-server`, or with `redis_cluster=True` a `RedisCluster`."""

    def __init__(self, binary, github_url, logs, make_server, redis_cluster=False):
        self._binary, self._github_url, self._logs, self._make_server = binary, github_url, logs, make_server
        self._redis_cluster = redis_cluster
        self.redis = None
        self.nodes = {}

    def start(self):
        self._logs.mkdir(parents=True, exist_ok=True)
        self.redis = RedisCluster(self._logs) if self._redis_cluster else RedisServer(self._logs)
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
