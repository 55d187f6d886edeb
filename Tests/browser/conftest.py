"""Fixtures of the browser tests: the GitHub simulator, the real `bff` server and headless Chromium.

Environment:
  BFF_BIN, SIM_BIN        the executables (default .build/debug/bff and .build/debug/github-sim)
  BROWSER_TEST_BFF_URL    use an already running server instead of starting one (restart tests skip)
  CHROMIUM_BIN, CHROMEDRIVER_BIN   default /usr/bin/chromium and /usr/bin/chromedriver
Screenshots go to artifacts/screenshots/ at the repository root.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from cluster import Cluster
from github_sim import SimulatorControl
from support import free_port, wait_for_http

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
LOGS = ROOT / "artifacts" / "browser-logs"


class ServerProcess:
    """The real `bff` on a fixed port; stop() and start() again reuse the port (to test recovery)."""

    def __init__(self, binary, github_url, port=None, name="bff", extra_args=(), extra_env=None):
        self.binary = binary
        self.github_url = github_url
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.extra_args = list(extra_args)
        self.extra_env = dict(extra_env or {})
        self.process = None
        self.starts = 0

    def start(self):
        LOGS.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        log = open(LOGS / f"{self.name}-{self.port}-{self.starts}.log", "wb")
        env = dict(os.environ, GITHUB_API_URL=self.github_url)
        env.pop("GITHUB_TOKEN", None)
        for name in ("GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET", "GITHUB_WEB_URL", "BFF_SECRET_KEY"):
            env.pop(name, None)
        env.update(self.extra_env)
        self.process = subprocess.Popen(
            [str(self.binary), "--port", str(self.port), "--public-dir", str(ROOT / "Public"),
             "--cache-file", "none", "--test-hooks", *self.extra_args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_for_http(self.url + "/readyz", process=self.process)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill9(self):
        """`kill -9`: the process dies at once, leaving its leases and connections behind."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None


def _binary(env_name, default):
    path = Path(os.environ.get(env_name, ROOT / default))
    return path if path.exists() else None


@pytest.fixture(scope="session")
def github():
    """The GitHub simulator the server talks to, with the switches the tests need (see github_sim.py)."""
    sim_bin = _binary("SIM_BIN", ".build/debug/github-sim")
    if sim_bin is None:
        pytest.fail("github-sim is not built: run `swift build --product github-sim` or set SIM_BIN")
    control = SimulatorControl.start(sim_bin, LOGS)
    yield control
    control.stop()


@pytest.fixture(scope="session")
def bff(github):
    """The real server, shared by the tests of a run (each test gets its own browser and session)."""
    external = os.environ.get("BROWSER_TEST_BFF_URL")
    if external:
        server = ServerProcess(None, github.url)
        server.url = external.rstrip("/")
        yield server
        return
    binary = _binary("BFF_BIN", ".build/debug/bff")
    if binary is None:
        pytest.fail("bff is not built: run `swift build --product bff` or set BFF_BIN")
    server = ServerProcess(binary, github.url)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_bff(github):
    """A server of this test's own, which the test may restart without disturbing the others."""
    if os.environ.get("BROWSER_TEST_BFF_URL"):
        pytest.skip("restarting needs a server the tests start")
    binary = _binary("BFF_BIN", ".build/debug/bff")
    if binary is None:
        pytest.fail("bff is not built")
    server = ServerProcess(binary, github.url, name="bff-own")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def signin_bff(github, tmp_path):
    """A server of this test's own with "Sign in with GitHub" on, the simulator playing GitHub's side
    (its demo OAuth app), its logins in a folder of the test's own."""
    if os.environ.get("BROWSER_TEST_BFF_URL"):
        pytest.skip("sign-in needs a server the tests start")
    binary = _binary("BFF_BIN", ".build/debug/bff")
    if binary is None:
        pytest.fail("bff is not built")
    server = ServerProcess(
        binary, github.url, name="bff-signin", extra_args=["--state-dir", str(tmp_path / "state")],
        extra_env={"GITHUB_CLIENT_ID": "sim-client-id", "GITHUB_CLIENT_SECRET": "sim-client-secret",
                   "GITHUB_WEB_URL": github.url})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def cluster(github):
    """A cluster of this test's own: a real `redis-server` and three `bff --redis-url` nodes (a, b, c)."""
    if os.environ.get("BROWSER_TEST_BFF_URL"):
        pytest.skip("a cluster needs servers the tests start")
    binary = _binary("BFF_BIN", ".build/debug/bff")
    if binary is None:
        pytest.fail("bff is not built")
    nodes = Cluster(binary, github.url, LOGS, ServerProcess)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def redis_cluster_nodes(github):
    """Three `bff` nodes (a, b, c) on a real Redis Cluster of this test's own (3 masters, 1 replica each,
    `--redis-url redis+cluster://…` with its default of one replica ack)."""
    if os.environ.get("BROWSER_TEST_BFF_URL"):
        pytest.skip("a cluster needs servers the tests start")
    binary = _binary("BFF_BIN", ".build/debug/bff")
    if binary is None:
        pytest.fail("bff is not built")
    nodes = Cluster(binary, github.url, LOGS, ServerProcess, redis_cluster=True)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


# Installed in every document of a window before its own scripts (a new window needs it again: the
# command applies to the window it was sent to).
PAGE_RECORDER = """
    window.__cspViolations = [];
    window.__pageErrors = [];
    document.addEventListener('securitypolicyviolation',
        (e) => window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));
    window.addEventListener('error', (e) => window.__pageErrors.push(String(e.message)));
"""


def make_driver(width=1100, height=900, dark=False, extra_arguments=()):
    options = webdriver.ChromeOptions()
    for argument in extra_arguments:
        options.add_argument(argument)
    options.binary_location = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", "--lang=en-US", "--disable-extensions",
                     # Loopback only: other host names fail without a DNS query (avatars show initials),
                     # and the browser's own background traffic is off.
                     "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-default-apps", "--disable-domain-reliability", "--no-first-run",
                     "--no-default-browser-check", "--metrics-recording-only"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_window_size(width, height)
    # Record CSP violations and page errors from the very first script of every document.
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PAGE_RECORDER})
    if dark:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                               {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    return driver


@pytest.fixture
def browser(request):
    driver = make_driver()
    yield driver
    _save_console(driver, request.node.name)
    driver.quit()


@pytest.fixture
def screenshot():
    """`screenshot(driver, "name")` saves artifacts/screenshots/name.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(driver, name):
        path = SCREENSHOTS / f"{name}.png"
        driver.save_screenshot(str(path))
        return path
    return take


def _save_console(driver, name):
    try:
        entries = driver.get_log("browser")
    except Exception:
        return
    LOGS.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.\[\]-]+", "_", name)  # a test id may hold a path
    with open(LOGS / f"console-{safe}.txt", "w") as out:
        for entry in entries:
            out.write(f"{entry['level']} {entry['message']}\n")
