"""scripts/cluster.sh itself, run as an operator runs it (--demo, built binaries from BFF_BIN_DIR):
kill -9 of the node that owns a session leaves the rest serving it through HAProxy, the script names
the process that exited and keeps running and its logs, and SIGTERM stops every process it started."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("BFF_BIN_DIR") or os.path.join(ROOT, ".build", "debug")
# No proxy for loopback, whatever the environment says.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, headers=None):
    """(status, headers, body bytes) of one request; HTTP errors are answers too."""
    data = None if body is None else body.encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers or {})
    try:
        with OPENER.open(req, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


class Cluster:
    """The script in its own process group, its stdout and stderr lines read as they come."""

    def __init__(self, logs, flags=()):
        self.logs = logs
        self.ports = {"PORT": free_port(), "STATS_PORT": free_port(), "REDIS_PORT": free_port(), "SIM_PORT": free_port(),
                      "TLS_PORT": free_port()}
        base = free_port()
        while not all(self._free(base + i) for i in range(3)):
            base = free_port()
        self.ports["NODE_BASE_PORT"] = base
        env = dict(os.environ, BFF_BIN_DIR=BIN, LOGS_DIR=logs, **{k: str(v) for k, v in self.ports.items()})
        env.pop("GITHUB_TOKEN", None)
        self.out = open(os.path.join(logs, "script.out"), "w+")
        self.err = open(os.path.join(logs, "script.err"), "w+")
        self.process = subprocess.Popen(
            [os.path.join(ROOT, "scripts", "cluster.sh"), "--demo", *flags, "--", "--lease-ttl", "1"],
            cwd=ROOT, env=env, stdout=self.out, stderr=self.err, start_new_session=True)
        self.pids = {}

    @staticmethod
    def _free(port):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return True
            except OSError:
                return False

    def text(self):
        self.out.flush()
        self.err.flush()
        with open(self.out.name) as o, open(self.err.name) as e:
            return o.read() + e.read()

    def wait_for(self, needle, seconds):
        deadline = time.monotonic() + seconds
        while needle not in self.text():
            assert self.process.poll() is None, f"cluster.sh exited: {self.text()}"
            assert time.monotonic() < deadline, f"no '{needle}' within {seconds} s: {self.text()}"
            time.sleep(0.05)
        for line in self.text().splitlines():  # "cluster.sh: started node2 (pid 1234, …"
            if line.startswith("cluster.sh: started "):
                name, rest = line[len("cluster.sh: started "):].split(" (pid ", 1)
                self.pids[name] = int(rest.split(",", 1)[0])

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        for pid in self.pids.values():  # nothing it started outlives it
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cluster():
    for tool in ("redis-server", "haproxy", "curl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    for binary in ("bff", "github-sim"):
        if not os.access(os.path.join(BIN, binary), os.X_OK):
            pytest.skip(f"{BIN}/{binary} is not built (swift build --product {binary})")
    logs = tempfile.mkdtemp(prefix="bff-ops-test.")
    c = Cluster(logs)
    yield c
    c.stop()
    shutil.rmtree(logs, ignore_errors=True)


def input_until_accepted(port, sid, key, value, seconds=10):
    """A keyed greeting/name input through HAProxy, retried (same key) while a node dies; its inputSeq."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            status, _, body = request(
                port, "POST", f"/api/sessions/{sid}/greeting/name", json.dumps({"value": value}),
                {"Content-Type": "application/json", "Idempotency-Key": key})
        except OSError:
            status, body = 0, b""
        if status == 202:
            return json.loads(body)["inputSeq"]
        assert status in (0, 502, 503, 504), (status, body)
        time.sleep(0.05)
    raise AssertionError(f"input {key} not accepted within {seconds} s")


def test_a_killed_node_leaves_the_rest_serving_and_the_script_says_so(cluster):
    cluster.wait_for("cluster.sh: ready", 60)
    assert set(cluster.pids) == {"redis", "github-sim", "node1", "node2", "node3", "haproxy"}
    port = cluster.ports["PORT"]

    # --demo: searches reach the simulator through HAProxy.
    status, headers, body = request(port, "GET", "/api/search/repositories?q=swift&per_page=2")
    assert status == 200, body
    assert len(json.loads(body)["items"]) == 2

    status, _, body = request(port, "POST", "/api/sessions", "")
    assert status == 201, body
    sid = json.loads(body)["id"]
    assert input_until_accepted(port, sid, "one", "a") == 1
    owner = subprocess.run(
        [os.path.join(BIN, "bff"), "session-owner", sid, "--json", "--redis-url",
         f"redis://127.0.0.1:{cluster.ports['REDIS_PORT']}"], capture_output=True, text=True, timeout=10)
    node = json.loads(owner.stdout)["owner"]
    assert node in ("node1", "node2", "node3"), owner

    os.kill(cluster.pids[node], signal.SIGKILL)
    cluster.wait_for(f"cluster.sh: {node} (pid {cluster.pids[node]}) exited (killed by signal 9)", 10)
    # In the script's words only: not also bash's job notice ("cluster.sh: line 191: 1234 Killed  …").
    assert not re.search(r": line \d+: +\d+ ", cluster.text()), cluster.text()
    # The session goes on through HAProxy on the other nodes, with the next inputSeq.
    assert input_until_accepted(port, sid, "two", "b") == 2
    status, _, body = request(port, "GET", f"/api/sessions/{sid}/state")
    assert status == 200 and json.loads(body)["viewModels"]["greeting"]["buttonEnabled"] is True
    assert cluster.process.poll() is None, "cluster.sh stopped when one node died"
    for name, pid in cluster.pids.items():
        assert alive(pid) == (name != node), name
    # Logs: every process's, HAProxy's request log among them.
    logs = cluster.logs
    for name in cluster.pids:
        assert os.path.exists(os.path.join(logs, f"{name}.log")), name
    with open(os.path.join(logs, "haproxy.log")) as f:
        assert "POST /api/sessions HTTP/1.1" in f.read()

    cluster.stop()
    assert cluster.process.returncode == 0, cluster.text()
    assert "cluster.sh: stopped; logs kept in" in cluster.text()
    assert os.path.exists(os.path.join(logs, "node1.log")), "the logs folder was deleted"
    for name, pid in cluster.pids.items():
        assert not alive(pid), f"{name} (pid {pid}) outlived cluster.sh"


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    """A node port another process listens on would put that process behind HAProxy: refused at once."""
    if shutil.which("haproxy") is None or not os.access(os.path.join(BIN, "bff"), os.X_OK):
        pytest.skip("haproxy or bff missing")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, BFF_BIN_DIR=BIN, LOGS_DIR=str(tmp_path), NODE_BASE_PORT=str(port),
                   PORT=str(free_port()), STATS_PORT=str(free_port()), REDIS_PORT=str(free_port()))
        result = subprocess.run(
            [os.path.join(ROOT, "scripts", "cluster.sh")], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=20)
    assert result.returncode == 1, result
    assert f"port {port} is in use" in result.stderr
    assert "started" not in result.stdout


def test_tls_serves_the_page_over_http2_and_stops_with_the_rest(tmp_path):
    """--tls: a self-signed certificate made for it (or HAPROXY_CERT), HTTPS with h2 by ALPN on TLS_PORT."""
    for tool in ("redis-server", "haproxy", "curl", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    cert_dir = tmp_path / "certs"
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "make-cert.sh"), str(cert_dir)], check=True,
                   capture_output=True)
    os.environ["HAPROXY_CERT"] = str(cert_dir / "bff.pem")  # not var/certs of the checkout
    try:
        c = Cluster(str(tmp_path), flags=("--tls",))
    finally:
        del os.environ["HAPROXY_CERT"]
    try:
        c.wait_for("cluster.sh: ready:", 90)
        tls = c.ports["TLS_PORT"]
        assert f"https://127.0.0.1:{tls} (HTTP/2)" in c.text()
        out = subprocess.run(
            ["curl", "-sk", "--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
             f"https://127.0.0.1:{tls}/api/search/repositories?q=swift"],
            capture_output=True, text=True, timeout=30)
        assert out.stdout == "2 200", out
    finally:
        c.stop()
    assert c.pids and not any(alive(p) for p in c.pids.values()), c.text()
