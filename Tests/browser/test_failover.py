"""The page in a cluster failover: a real `redis-server`, three `bff` nodes
and the session's owner killed with `kill -9` while the page is in use.

The page is served by node `b` while node `a` owns its session (created there), so after `kill -9` of
`a` the page's inputs are answered `503` + `Retry-After` by `b` until the dead owner's lease ends and a
live node takes the session over (docs/CLUSTER.md). In `test_texts_while_the_pages_own_node_is_dead`
the page's own node is the owner: its inputs get no answer at all (network errors).
"""

import json
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from cluster import LEASE_TTL
from pages import (by_id, open_on_session, open_page, output, posts, record_posts, row_ids, search, session_id,
                   wait, wait_for_results, wait_until_live)

FAILOVER = LEASE_TTL + 10  # seconds a test waits for a takeover (the contract: lease TTL + 2 s)


def page_text(driver):
    return driver.find_element(By.TAG_NAME, "body").text


def banner_text(driver, element_id):
    banner = by_id(driver, element_id)
    return banner.text if banner.is_displayed() else ""


def type_over(driver, text):
    """Selects the query field's text and types `text` over it (one `input` event per key)."""
    field = by_id(driver, "query")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(text)
    return field


def search_state(cluster, session):
    status, snapshot = cluster.state(session)
    assert status == 200, (status, snapshot)
    return snapshot["viewModels"]["search"]


def probe_input_seq(cluster, session):
    """The session's next inputSeq, found by sending one more input (a no-op sort) with a fresh key: an
    input applied twice would have used up a number, and the probe would show the gap."""
    from cluster import request
    import uuid
    node = cluster.live_nodes()[0]
    status, _, body = request("POST", f"{node.url}/api/sessions/{session}/search/sort", {"value": "best-match"},
                              {"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex})
    assert status == 202, (status, body)
    return body["inputSeq"]


def screenshots_light_and_dark(driver, screenshot, name):
    driver.execute_script("window.scrollTo(0, 0)")
    screenshot(driver, name)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                           {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    screenshot(driver, name + "-dark")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_an_input_answered_503_while_the_owner_is_dead_is_retried_and_lands_once(cluster, browser, screenshot):
    session = cluster.create_session(cluster.a)
    open_on_session(browser, cluster.b, session)
    assert session_id(browser) == session
    search(browser, "swift")
    swift_rows = row_ids(browser)
    record_posts(browser)

    cluster.a.kill9()
    type_over(browser, "parser").send_keys(Keys.ENTER)

    # While the dead owner's lease lasts: "reconnecting", not "refused"; the old results are dimmed and
    # Search waits (item 5: no Search button enabled under a "reconnecting" banner).
    wait(browser, lambda d: "reconnecting" in banner_text(d, "connection-banner").lower(), timeout=5,
         message="no 'reconnecting' banner while the input is answered 503")
    assert any(p["status"] == 503 for p in posts(browser)), posts(browser)
    assert banner_text(browser, "input-error") == "", "a retried input was shown as refused"
    assert "refused" not in page_text(browser)
    assert not by_id(browser, "search-button").is_enabled(), "Search enabled while the page says reconnecting"
    screenshots_light_and_dark(browser, screenshot, "failover-reconnecting")

    # After the takeover the same inputs land, once each, and the message goes.
    wait(browser, lambda d: banner_text(d, "connection-banner") == "", timeout=FAILOVER,
         message="the 'reconnecting' banner stayed after the takeover")
    wait(browser, lambda d: output(d, "search", "query") == "parser" and output(d, "search", "isLoading") is False
         and output(d, "search", "totalCount") is not None and row_ids(d) != swift_rows, timeout=FAILOVER,
         message="the search typed while the owner was dead did not land")
    state = search_state(cluster, session)
    assert state["query"] == "parser"
    assert [str(r["id"]) for r in state["repositories"]] == row_ids(browser), "the page shows the server's results"
    assert banner_text(browser, "input-error") == ""

    sent = posts(browser)
    inputs = [p for p in sent if p["path"].startswith(f"/api/sessions/{session}/")]
    keys = list(dict.fromkeys(p["key"] for p in inputs))
    assert all(keys), "every input carries an Idempotency-Key"
    # "p" went first and was retried with its own key; "parser" (coalesced) and the submit followed.
    first = [p for p in inputs if p["key"] == keys[0]]
    assert [p["status"] for p in first][-1] == 202 and 503 in [p["status"] for p in first], first
    for tried, retry in zip(first, first[1:]):  # Retry-After honoured: no retry before it said
        if tried["retryAfter"] is not None:
            assert retry["at"] - tried["at"] >= float(tried["retryAfter"]) * 1000 - 50, first
    acknowledged = [p["inputSeq"] for p in inputs if p["status"] == 202]
    assert len(acknowledged) == len(keys) == 3, inputs
    assert acknowledged == list(range(acknowledged[0], acknowledged[0] + 3)), f"applied in order, once: {inputs}"
    assert probe_input_seq(cluster, session) == acknowledged[-1] + 1, "an input was applied twice"


def test_a_replaced_session_gets_what_the_user_typed_and_searches(cluster, browser):
    session = cluster.create_session(cluster.a)
    open_on_session(browser, cluster.b, session)
    field = by_id(browser, "query")
    field.send_keys("swift")
    wait(browser, lambda d: search_state(cluster, session)["query"] == "swift")

    # The owner dies; the user keeps typing (answered 503 until the takeover); then the session is
    # deleted, and while the page creates its replacement, session creation fails for a moment
    # (as behind a proxy whose backend died: no answer).
    cluster.a.kill9()
    field.send_keys(" ui")
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/api/sessions"]})
    record_posts(browser)
    cluster.delete_session(session, via=cluster.c)
    wait(browser, lambda d: any(p["path"] == "/api/sessions" and p["status"] == 0 for p in posts(d)),
         timeout=FAILOVER, message="the page did not try to create a new session")
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})

    wait(browser, lambda d: session_id(d) not in (None, session), timeout=FAILOVER, message="no new session")
    wait_until_live(browser, timeout=FAILOVER)
    replacement = session_id(browser)
    # What the user typed is sent to the new session: Search works at once, with no stale error.
    wait(browser, lambda d: search_state(cluster, replacement)["query"] == "swift ui", timeout=FAILOVER,
         message="the typed query was not sent to the new session")
    assert field.get_attribute("value") == "swift ui"
    wait(browser, lambda d: by_id(d, "search-button").is_enabled(), message="Search stayed disabled")
    assert "new one was started" in banner_text(browser, "session-notice")
    wait(browser, lambda d: banner_text(d, "input-error") == "", timeout=3,
         message="an error that no longer holds stayed on the page")
    assert "Could not start a session" not in page_text(browser)
    assert "refused" not in page_text(browser)

    field.send_keys(Keys.ENTER)
    wait_for_results(browser)
    state = search_state(cluster, replacement)
    assert state["query"] == "swift ui" and state["totalCount"] is not None and state["repositories"]
    assert [str(r["id"]) for r in state["repositories"]] == row_ids(browser)


def test_texts_while_the_pages_own_node_is_dead(cluster, browser, screenshot):
    # The page's own node runs its session: kill -9 leaves the page with no answer at all.
    open_page(browser, cluster.a)
    session = session_id(browser)
    search(browser, "swift")
    browser.execute_script("window.bffClient.inputRetryMs = 3000")  # the default is 30 s
    record_posts(browser)
    cluster.a.kill9()
    wait(browser, lambda d: "reconnecting" in banner_text(d, "connection-banner").lower(), timeout=10,
         message="no 'reconnecting' banner while the server is down")
    assert not by_id(browser, "search-button").is_enabled(), "Search enabled while the page says reconnecting"
    type_over(browser, "parser")

    # Past the retry window: one message that says what happened, no "refused … could not be reached".
    wait(browser, lambda d: banner_text(d, "input-error") != "", timeout=15, message="no message after giving up")
    message = banner_text(browser, "input-error")
    assert "refused" not in message and "Failed to fetch" not in message, message
    assert "did not answer" in message and "3 s" in message, message
    assert "reconnecting" in banner_text(browser, "connection-banner").lower()
    # Bounded: "p" was tried (no answer) within its 3 s window and then no more; "parser", queued
    # behind it, was given up with it (sent alone it would have applied out of order).
    tried = [p for p in posts(browser) if p["path"].startswith(f"/api/sessions/{session}/")]
    assert len({p["key"] for p in tried}) == 1 and all(p["status"] == 0 for p in tried), tried
    assert len(tried) >= 2 and tried[-1]["at"] - tried[0]["at"] <= 3000 + 500, tried
    attempts = len(tried)

    # The node comes back: what was typed meanwhile is not lost, and the message that no longer holds goes.
    cluster.a.start()
    wait_until_live(browser, timeout=FAILOVER)
    wait(browser, lambda d: search_state(cluster, session)["query"] == "parser", timeout=FAILOVER,
         message="the query typed while the server was down was lost")
    given_up_key = tried[0]["key"]
    assert [p for p in posts(browser) if p["key"] == given_up_key][attempts:] == [], "a given-up input was sent again"
    wait(browser, lambda d: banner_text(d, "input-error") == "", timeout=5, message="the give-up message stayed")
    assert by_id(browser, "search-button").is_enabled()


def test_no_results_say_so_and_the_opened_line_goes_with_a_later_search(cluster, browser, screenshot):
    session = cluster.create_session(cluster.a)
    open_on_session(browser, cluster.b, session)
    browser.execute_script("window.open = () => null;")
    search(browser, "swift")
    browser.find_elements(By.CSS_SELECTOR, "#results .repo-open")[0].click()
    opened = by_id(browser, "opened")
    wait(browser, lambda d: opened.is_displayed(), message="no 'Opened' line after selecting a row")

    cluster.a.kill9()
    type_over(browser, "zzqv nothingmatchesthis").send_keys(Keys.ENTER)
    wait(browser, lambda d: output(d, "search", "totalCount") == 0 and output(d, "search", "isLoading") is False,
         timeout=FAILOVER, message="the search typed while the owner was dead did not land")
    count = by_id(browser, "result-count").text
    assert count != "0 repositories"
    assert "No repositories match" in count, count
    hint = by_id(browser, "no-results")
    assert hint.is_displayed() and "Try" in hint.text, "no suggestion of what to change"
    assert not opened.is_displayed(), "the 'Opened …' line outlived a later search"
    assert row_ids(browser) == []
    screenshots_light_and_dark(browser, screenshot, "search-no-results")

    search(browser, "swift")
    assert not by_id(browser, "no-results").is_displayed()


def test_the_shared_status_reaches_every_tab_in_cluster_mode(cluster, browser):
    """In cluster mode a `status` change is not an event of the session: it comes without an id (and on
    the shared stream without a seq). The page shows it all the same, on the shared stream and on a
    session's own stream."""
    node = cluster.b
    message = "GitHub cannot be reached; results may be out of date."
    open_page(browser, node)
    banner = by_id(browser, "status-banner")
    wait(browser, lambda d: d.execute_script("return window.bffClient && bffClient.streamTransport") is not None,
         message="the page's stream did not start")
    assert not banner.is_displayed()
    body = json.dumps({"reachable": False, "message": message}).encode()
    request = urllib.request.Request(f"{node.url}/api/_test/status", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5):
        pass
    wait(browser, lambda d: banner.is_displayed() and banner.text == message,
         message="the cluster's status change did not reach the page")
