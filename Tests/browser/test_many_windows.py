"""Many windows of one browser on plain HTTP/1.1 straight to `bff`: one event-stream connection
for all of them, owned by a SharedWorker, or by a window elected with Web Locks where there is none, or,
where neither exists, each window's session's own stream.

Windows, not tabs (`new_window("window")`): each is visible, so no rule for hidden tabs can help. Over
HTTP/1.1 Chromium opens at most 6 connections per host; with one stream per window the seventh window
never loads.
"""

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By

from pages import output, search, session_id, wait, wait_until_live
from windows import (InputPump, assert_every_event_once, open_streams, open_window, page_event_sources,
                     post_input, record_applied, request, state, transport, wait_for_open_streams, wait_live_everywhere,
                     wait_until_matches)

QUERIES = ["swift", "parser", "router", "cache", "server", "client", "logger", "editor"]


def switch(driver, handle):
    driver.switch_to.window(handle)
    return driver


def no_page_errors(driver):
    violations = driver.execute_script("return window.__cspViolations")
    assert [v for v in violations if not v.startswith("img-src")] == [], violations
    assert driver.execute_script("return window.__pageErrors") == []


@pytest.mark.parametrize("mode", ["shared-worker", "web-locks"])
def test_eight_windows_load_and_search_on_one_stream(own_bff, browser, mode):
    handles = []
    browser.set_page_load_timeout(10)  # with one stream per window, the seventh never loads
    for i in range(8):
        try:
            handle, seconds = open_window(browser, own_bff, mode, new=i > 0)
        except TimeoutException:
            pytest.fail(f"window {i + 1} did not load within 10 s")
        assert seconds < 5, f"window {i + 1} took {seconds:.1f} s to load"
        assert browser.execute_script("return document.visibilityState") == "visible"
        handles.append(handle)
    roles = [transport(switch(browser, h)) for h in handles]
    if mode == "shared-worker":
        assert roles == ["shared-worker"] * 8
    else:
        assert sorted(roles) == ["web-locks-follower"] * 7 + ["web-locks-owner"], roles
    assert wait_for_open_streams(own_bff, 1) == 1, "more than one event stream for one browser"

    # Each window searches, on its own session, and shows only what its session's view models say.
    sessions = []
    for handle, query in zip(handles, QUERIES):
        search(switch(browser, handle), query)
        sessions.append(session_id(browser))
    assert len(set(sessions)) == 8, sessions
    for handle, query, session in zip(handles, QUERIES, sessions):
        switch(browser, handle)
        assert output(browser, "search", "query") == query
        wait_until_matches(browser, own_bff, session)
        no_page_errors(browser)
    assert open_streams(own_bff) == 1

    # The connection is the worker's, or the owner window's: no other window opens one.
    opened = {h: page_event_sources(switch(browser, h)) for h in handles}
    owners = [h for h, role in zip(handles, roles) if role == "web-locks-owner"]
    for handle, sources in opened.items():
        if handle in owners:
            assert sources and all(s.startswith("/api/events?sessions=") for s in sources), sources
        else:
            assert sources == [], f"a window opened its own stream: {sources}"


def test_closing_the_owner_window_hands_the_stream_over_without_losing_an_event(own_bff, browser):
    handles = [open_window(browser, own_bff, "web-locks", new=i > 0)[0] for i in range(4)]
    assert wait_for_open_streams(own_bff, 1) == 1
    owner = [h for h in handles if transport(switch(browser, h)) == "web-locks-owner"]
    assert len(owner) == 1
    followers = [h for h in handles if h not in owner]
    sessions, since = {}, {}
    for handle in followers:
        switch(browser, handle)
        sessions[handle] = session_id(browser)
        since[handle] = record_applied(browser)

    # Events keep coming for every remaining window while its owner window closes.
    with InputPump(own_bff, sessions.values()) as pump:
        pump.wait_rounds(5)
        switch(browser, owner[0]).close()
        pump.wait_rounds(3)
        wait(switch(browser, followers[0]), lambda d: [transport(switch(d, h)) for h in followers].count(
            "web-locks-owner") == 1, message="no window took the connection over")
        pump.wait_rounds(5)

    for handle in followers:
        switch(browser, handle)
        wait_until_matches(browser, own_bff, sessions[handle])
        assert_every_event_once(browser, since[handle], state(own_bff, sessions[handle])["seq"])
    assert wait_for_open_streams(own_bff, 1) == 1
    search(switch(browser, followers[-1]), "parser")


@pytest.mark.parametrize("mode", ["shared-worker", "web-locks"])
def test_a_dropped_connection_resumes_every_window_from_its_position(cluster, browser, mode):
    # The windows are served by node b, their sessions run on node a (sessions live in Redis). Killing b
    # cuts the browser's one connection for real; b comes back on its port, and the browser's own
    # EventSource reconnect (Last-Event-ID: the stream's position) resumes every session where it was.
    sessions = [cluster.create_session(cluster.a) for _ in range(4)]
    handles = [open_window(browser, cluster.b, mode, session=s, new=i > 0)[0] for i, s in enumerate(sessions)]
    assert [session_id(switch(browser, h)) for h in handles] == sessions
    assert wait_for_open_streams(cluster.b, 1) == 1
    # One event each first: a resume needs an id the session's history has (its creation, id 0, is not
    # an event: resuming from it is a fresh snapshot, docs/CLUSTER.md "Replay rule").
    for i, session in enumerate(sessions):
        post_input(cluster.a, session, "search", "query", f"before {i}")
    for handle, session in zip(handles, sessions):
        wait_until_matches(switch(browser, handle), cluster.a, session)
    since = {h: record_applied(switch(browser, h)) for h in handles}
    sources = {h: len(page_event_sources(switch(browser, h))) for h in handles}

    cluster.b.kill9()
    for i, session in enumerate(sessions):  # events the windows miss while the connection is down
        post_input(cluster.a, session, "search", "query", f"while away {i}")
        post_input(cluster.a, session, "greeting", "name", f"away {i}")
    wait(switch(browser, handles[0]), lambda d: d.execute_script(
        "return document.documentElement.dataset.connection") == "reconnecting", timeout=10,
        message="the window did not say it is reconnecting")
    cluster.b.start()

    for handle, session in zip(handles, sessions):
        switch(browser, handle)
        wait_until_matches(browser, cluster.a, session, timeout=30)
        assert output(browser, "search", "query") == f"while away {sessions.index(session)}"
        assert_every_event_once(browser, since[handle], state(cluster.a, session)["seq"])
        # The browser's own reconnect: no window (nor the owner window) opened a new EventSource.
        assert len(page_event_sources(browser)) == sources[handle]
    assert wait_for_open_streams(cluster.b, 1) == 1


@pytest.mark.parametrize("mode, expected, path", [
    ("shared-worker", "shared-worker", None),
    ("web-locks", "web-locks-owner", "/api/events?sessions={id}"),
    ("broken-worker", "web-locks-owner", "/api/events?sessions={id}"),
    ("direct", "direct", "/api/sessions/{id}/events"),
], ids=["shared-worker", "web-locks", "broken-worker", "direct"])
def test_each_transport_serves_a_window(bff, browser, mode, expected, path):
    open_window(browser, bff, mode, new=False)
    session = session_id(browser)
    assert page_event_sources(browser) == ([path.format(id=session)] if path else [])
    assert transport(browser) == expected
    search(browser, "swift")
    wait_until_matches(browser, bff, session)
    no_page_errors(browser)
    assert browser.find_elements(By.CSS_SELECTOR, "#results > li.repo")


def test_a_frozen_owner_window_hands_the_stream_over(own_bff, browser):
    # A frozen page runs nothing (Page Lifecycle; Chrome freezes background tabs): an owner that kept the
    # connection would stall every other window. It lets go on `freeze`, and takes its place again after.
    handles = [open_window(browser, own_bff, "web-locks", new=i > 0)[0] for i in range(3)]
    assert wait_for_open_streams(own_bff, 1) == 1
    owner = [h for h in handles if transport(switch(browser, h)) == "web-locks-owner"]
    assert len(owner) == 1
    followers = [h for h in handles if h not in owner]
    owner_session = session_id(switch(browser, owner[0]))
    sessions, since = {}, {}
    for handle in followers:
        switch(browser, handle)
        sessions[handle] = session_id(browser)
        since[handle] = record_applied(browser)

    switch(browser, owner[0])
    browser.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "frozen"})
    try:
        with InputPump(own_bff, sessions.values()) as pump:
            wait(switch(browser, followers[0]), lambda d: [transport(switch(d, h)) for h in followers].count(
                "web-locks-owner") == 1, message="no window took the connection over from the frozen one")
            pump.wait_rounds(5)
        for handle in followers:
            switch(browser, handle)
            wait_until_matches(browser, own_bff, sessions[handle])
            assert_every_event_once(browser, since[handle], state(own_bff, sessions[handle])["seq"])
        assert wait_for_open_streams(own_bff, 1) == 1, "the frozen window still holds a stream"
        post_input(own_bff, owner_session, "search", "query", "while frozen")
    finally:
        switch(browser, owner[0])
        browser.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "active"})

    # Thawed, the old owner joins the new one where it was, and gets what it missed.
    wait_until_matches(browser, own_bff, owner_session)
    assert output(browser, "search", "query") == "while frozen"
    assert transport(browser) == "web-locks-follower"
    wait_live_everywhere(browser, handles)
    assert wait_for_open_streams(own_bff, 1) == 1


@pytest.mark.parametrize("mode", ["shared-worker", "web-locks"])
def test_an_ended_session_is_replaced_in_its_own_window_only(own_bff, browser, mode):
    handles = [open_window(browser, own_bff, mode, new=i > 0)[0] for i in range(3)]
    assert wait_for_open_streams(own_bff, 1) == 1
    sessions = [session_id(switch(browser, h)) for h in handles]
    status, _ = request("DELETE", f"{own_bff.url}/api/sessions/{sessions[1]}")
    assert status == 204

    # The `end` reaches the window of that session, which starts a new one and says so.
    switch(browser, handles[1])
    wait(browser, lambda d: session_id(d) not in (None, sessions[1]), message="no new session after `end`")
    wait_until_live(browser)
    assert "new one was started" in browser.find_element(By.ID, "session-notice").text
    search(browser, "swift")
    wait_until_matches(browser, own_bff, session_id(browser))
    # The other windows keep their sessions and their events, on the same one stream.
    for handle, session in zip(handles[::2], sessions[::2]):
        switch(browser, handle)
        assert session_id(browser) == session
        assert not browser.find_element(By.ID, "session-notice").is_displayed()
        post_input(own_bff, session, "search", "query", f"still {session}")
        wait_until_matches(browser, own_bff, session)
    assert wait_for_open_streams(own_bff, 1) == 1
