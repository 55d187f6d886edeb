"""Eight windows through HAProxy with TLS: the shipped deploy/haproxy.cfg with a self-signed
certificate (scripts/make-cert.sh) in front of a real 3-node cluster, Chromium on HTTPS. The page's
connection is HTTP/2 (ALPN), every window loads and searches, and the browser holds one multiplexed
event stream for all of them (the nodes see HTTP/1.1 from HAProxy).
"""

import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import LOGS, ROOT, make_driver
from pages import output, search, session_id
from support import free_port
from windows import open_window, transport

QUERIES = ["swift", "parser", "router", "cache", "server", "client", "logger", "editor"]


class Edge:
    """HAProxy running the shipped config on free ports, TLS on, in front of the cluster's nodes."""

    def __init__(self, cluster):
        self.certs = Path(tempfile.mkdtemp(prefix="bff-certs-"))
        subprocess.run(["bash", str(ROOT / "scripts/make-cert.sh"), str(self.certs)], check=True,
                       capture_output=True)
        self.plain, self.tls = free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.tls}"
        env = dict(os.environ, HAPROXY_BIND=f"127.0.0.1:{self.plain}", HAPROXY_TLS_BIND=f"127.0.0.1:{self.tls}",
                   HAPROXY_CERT=str(self.certs / "bff.pem"), HAPROXY_STATS_BIND=f"127.0.0.1:{free_port()}")
        for i, name in enumerate(("a", "b", "c")):
            env[f"BFF_NODE{i + 1}"] = f"127.0.0.1:{cluster.nodes[name].port}"
        LOGS.mkdir(parents=True, exist_ok=True)
        self._log = open(LOGS / f"haproxy-{self.tls}.log", "wb")
        self.process = subprocess.Popen(["haproxy", "-f", str(ROOT / "deploy/haproxy.cfg")], env=env,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.plain}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError("HAProxy did not serve the nodes within 15 s")

    def stop(self):
        self.process.kill()
        self.process.wait()
        self._log.close()
        shutil.rmtree(self.certs, ignore_errors=True)


def open_streams(cluster):
    """Open event-stream connections over the three nodes (`bff_open_event_streams`)."""
    total = 0
    for node in cluster.nodes.values():
        with urllib.request.urlopen(f"{node.url}/metrics", timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("bff_open_event_streams "):
                    total += int(float(line.split()[1]))
    return total


@pytest.fixture
def tls_browser():
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed")
    driver = make_driver(extra_arguments=["--ignore-certificate-errors"])
    yield driver
    driver.quit()


def test_eight_windows_over_http2_through_haproxy_share_one_stream(cluster, tls_browser):
    edge = Edge(cluster)
    try:
        browser = tls_browser
        browser.set_page_load_timeout(10)
        handles = []
        for i in range(8):
            handle, seconds = open_window(browser, edge, "shared-worker", new=i > 0)
            assert seconds < 5, f"window {i + 1} took {seconds:.1f} s to load"
            protocol = browser.execute_script(
                "return performance.getEntriesByType('navigation')[0].nextHopProtocol")
            assert protocol == "h2", f"window {i + 1} loaded over {protocol}"
            handles.append(handle)
        for handle in handles:
            browser.switch_to.window(handle)
            assert transport(browser) == "shared-worker"
        sessions = []
        for handle, query in zip(handles, QUERIES):
            browser.switch_to.window(handle)
            search(browser, query)
            sessions.append(session_id(browser))
            assert output(browser, "search", "query") == query
        assert len(set(sessions)) == 8, sessions
        deadline = time.monotonic() + 10
        while open_streams(cluster) != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert open_streams(cluster) == 1, "one event stream for the browser's eight windows"
    finally:
        edge.stop()
