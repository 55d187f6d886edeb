"""Many windows of one browser for the browser tests: open them with a chosen event-stream transport, read
the server's count of open streams, record the events each window applies, and compare a window with
`GET /state`.

A transport is chosen by taking browser features away from the page before its scripts run:
`shared-worker` (nothing taken), `web-locks` (no `SharedWorker`: the tabs elect an owner),
`broken-worker` (a `SharedWorker` whose script does not load), `direct` (no `SharedWorker`, Web Locks
or `BroadcastChannel`: each tab opens its session's own stream).
"""

import json
import threading
import time
import urllib.error
import urllib.request

from conftest import PAGE_RECORDER
from pages import open_page, wait, wait_until_live

TAKE_AWAY = {
    "shared-worker": "",
    "web-locks": "delete window.SharedWorker;",
    # A worker whose script does not load (404): the page must fall back to the election.
    "broken-worker": """
        const RealSharedWorker = window.SharedWorker;
        window.SharedWorker = class extends RealSharedWorker {
            constructor(url, options) { super(new URL('no-such-worker.js', url), options); }
        };
    """,
    "direct": """
        delete window.SharedWorker;
        delete window.BroadcastChannel;
        Object.defineProperty(Navigator.prototype, 'locks', {configurable: true, get: () => undefined});
    """,
}

# Every EventSource the page itself makes (path and query): the worker's are not the page's.
RECORD_EVENT_SOURCES = """
    window.__eventSources = [];
    const NativeEventSource = window.EventSource;
    window.EventSource = class extends NativeEventSource {
        constructor(url, init) {
            super(url, init);
            const u = new URL(String(url), location.href);
            window.__eventSources.push(u.pathname + u.search);
        }
    };
"""

# What the window's client applies from now on: [kind, seq asked, seq before, seq after] per call of the
# output store (S: snapshot, E: view-model event). A call that leaves the seq unchanged was a duplicate.
RECORD_APPLIED = """
    const store = window.bffClient._store;
    window.__applied = [];
    for (const [method, kind] of [['applySnapshot', 'S'], ['applyEvent', 'E']]) {
        const original = store[method].bind(store);
        store[method] = (...args) => {
            const before = store.seq;
            const data = kind === 'S' ? args[0] : args[1];
            const asked = Number(args[args.length - 1] || (data && data.seq));
            original(...args);
            window.__applied.push([kind, asked, before, store.seq]);
        };
    }
    return store.seq;
"""


def open_window(driver, server, transport, session=None, new=True, page="index.html"):
    """Opens `page` of `server` in a new window (`new_window("window")`, not a tab) with `transport`,
    on `session` when given (put into the window's sessionStorage first); returns (handle, seconds until
    the window was live)."""
    if new:
        driver.switch_to.new_window("window")
    # The first window of a driver has the page recorder already (make_driver).
    for source in (PAGE_RECORDER if new else "", TAKE_AWAY[transport], RECORD_EVENT_SOURCES):
        if source:
            driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": source})
    started = time.monotonic()
    if session:
        driver.get(f"{server.url}/favicon.svg")
        driver.execute_script("sessionStorage.setItem('bff.sessionId', arguments[0])", session)
        started = time.monotonic()
    open_page(driver, server, page)
    return driver.current_window_handle, time.monotonic() - started


def transport(driver):
    return driver.execute_script("return window.bffClient.streamTransport")


def page_event_sources(driver):
    return driver.execute_script("return window.__eventSources")


def open_streams(server):
    """The server's `bff_open_event_streams` (one per open stream connection, multiplexed or not)."""
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("bff_open_event_streams "):
                return float(line.split()[1])
    raise AssertionError("no bff_open_event_streams in /metrics")


def wait_for_open_streams(server, count, timeout=10):
    """Waits until the server counts `count` open streams (a stream being replaced overlaps its successor
    for a moment) and returns the count seen last."""
    deadline = time.monotonic() + timeout
    seen = open_streams(server)
    while seen != count and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = open_streams(server)
    return seen


def record_applied(driver):
    """Starts recording what the window applies; returns its seq at that moment."""
    return driver.execute_script(RECORD_APPLIED)


def applied(driver):
    """What the window applied since `record_applied`: [(kind, seq)], duplicates left out."""
    calls = driver.execute_script("return window.__applied")
    return [(kind, after) for kind, asked, before, after in calls
            if after != before or (kind == "S" and asked >= before)]


def assert_every_event_once(driver, since, until):
    """The window applied every event after seq `since` up to `until` exactly once, in order, and no
    snapshot (a snapshot would have papered over a lost event)."""
    got = applied(driver)
    assert [kind for kind, _ in got if kind == "S"] == [], f"a snapshot instead of the events: {got}"
    seqs = [seq for _, seq in got]
    assert seqs == list(range(since + 1, until + 1)), f"events lost or repeated after {since}: {seqs}"


def request(method, url, body=None, headers=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        return error.code, None


def state(server, session):
    status, body = request("GET", f"{server.url}/api/sessions/{session}/state")
    assert status == 200, (status, session)
    return body


def post_input(server, session, view_model, name, value):
    status, body = request("POST", f"{server.url}/api/sessions/{session}/{view_model}/{name}", {"value": value},
                           {"Content-Type": "application/json"})
    assert status == 202, (status, body)
    return body["inputSeq"]


def matches_state(driver, snapshot):
    """True when the window's local copy equals the snapshot: its seq and every output."""
    local = driver.execute_script("""
        const client = window.bffClient;
        const out = {};
        for (const [vm, outputs] of Object.entries(arguments[0])) {
            out[vm] = {};
            for (const name of Object.keys(outputs)) out[vm][name] = client.get(vm, name) ?? null;
        }
        return [client.seq, out];
    """, snapshot["viewModels"])
    return local == [snapshot["seq"], snapshot["viewModels"]]


def wait_until_matches(driver, server, session, timeout=15):
    """Waits until the window shows what `GET /state` says (the server's state can move meanwhile)."""
    wait(driver, lambda d: matches_state(d, state(server, session)), timeout,
         f"the window did not converge to GET /state of {session}")


class InputPump:
    """Sends `search/query` inputs to sessions from a thread, round after round, until stopped: events
    keep coming while a test changes the connection."""

    def __init__(self, server, sessions, interval=0.05):
        self.server, self.sessions, self.interval = server, list(sessions), interval
        self.rounds = 0
        self.errors = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def _run(self):
        while not self._stop.is_set():
            for i, session in enumerate(self.sessions):
                try:
                    post_input(self.server, session, "search", "query", f"pump {i} {self.rounds}")
                except Exception as error:  # reported by the test, not lost in the thread
                    self.errors.append(repr(error))
            self.rounds += 1
            self._stop.wait(self.interval)

    def wait_rounds(self, more, timeout=20):
        target = self.rounds + more
        deadline = time.monotonic() + timeout
        while self.rounds < target and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.rounds >= target, f"the pump sent only {self.rounds} rounds"

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)
        assert not self.errors, self.errors


def wait_live_everywhere(driver, handles, timeout=15):
    for handle in handles:
        driver.switch_to.window(handle)
        wait_until_live(driver, timeout)
