"""Sessions, the event stream and upstream faults: the page recovers and says what happened."""

import json
import urllib.request

from pages import by_id, open_page, output, search, session_id, wait, wait_until_live


def test_reload_resumes_the_session(bff, browser):
    open_page(browser, bff)
    query = "swift"
    by_id(browser, "query").send_keys(query)
    wait(browser, lambda d: output(d, "search", "query") == query)
    before = session_id(browser)
    browser.refresh()
    wait_until_live(browser)
    assert session_id(browser) == before
    wait(browser, lambda d: by_id(d, "query").get_attribute("value") == query,
         message="the query field was not restored from the snapshot")


def test_deleted_session_is_replaced_and_said_so(bff, browser, screenshot):
    open_page(browser, bff)
    old = session_id(browser)
    request = urllib.request.Request(f"{bff.url}/api/sessions/{old}", method="DELETE")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 204
    wait(browser, lambda d: session_id(d) not in (None, old), message="no new session after `end`")
    wait_until_live(browser)
    notice = by_id(browser, "session-notice")
    assert notice.is_displayed() and "new one was started" in notice.text
    screenshot(browser, "session-replaced")
    search(browser, "swift")  # the new session works


def test_server_restart_recovers(own_bff, browser, screenshot):
    open_page(browser, own_bff)
    search(browser, "swift")
    old = session_id(browser)
    own_bff.stop()
    wait(browser, lambda d: by_id(d, "connection-banner").is_displayed(),
         message="no reconnecting banner while the server is down")
    screenshot(browser, "reconnecting")
    own_bff.start()
    # The restarted server does not know the old session: the client finds out and starts a new one.
    wait(browser, lambda d: session_id(d) not in (None, old), timeout=40, message="no new session after restart")
    wait_until_live(browser, timeout=40)
    assert not by_id(browser, "connection-banner").is_displayed()
    assert "new one was started" in by_id(browser, "session-notice").text
    search(browser, "swift")


def test_hidden_tab_closes_the_stream_and_resumes(bff, browser):
    open_page(browser, bff)
    browser.execute_script("""
        window.bffClient.hiddenCloseMs = 100;
        window.__visibility = 'hidden';
        Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => window.__visibility});
        document.dispatchEvent(new Event('visibilitychange'));
    """)
    wait(browser, lambda d: d.execute_script("return document.documentElement.dataset.connection") == "paused")
    assert browser.execute_script("return window.bffClient._source") is None
    # An input while paused still reaches the server; its output arrives with the resumed stream's snapshot.
    by_id(browser, "query").send_keys("while hidden")
    browser.execute_script("window.__visibility = 'visible'; document.dispatchEvent(new Event('visibilitychange'));")
    wait_until_live(browser)
    wait(browser, lambda d: output(d, "search", "query") == "while hidden")


def test_rate_limit_shows_banner_and_countdown(github, own_bff, browser, screenshot):
    open_page(browser, own_bff)
    github.rate_limit(30)
    try:
        field = by_id(browser, "query")
        field.send_keys("rate limited")
        wait(browser, lambda d: by_id(d, "search-button").is_enabled())
        field.send_keys("\n")
        wait(browser, lambda d: by_id(d, "error").is_displayed(), message="no error shown")
        error = output(browser, "search", "error")
        assert error["kind"] == "rateLimited"
        assert by_id(browser, "error-message").text == error["message"]
        countdown = by_id(browser, "error-countdown")
        assert countdown.is_displayed()
        first = int(countdown.get_attribute("data-seconds-left"))
        assert 0 < first <= error["retryAfterSeconds"]
        wait(browser, lambda d: int(countdown.get_attribute("data-seconds-left")) < first, timeout=5,
             message="the countdown does not count")
        assert f"{countdown.get_attribute('data-seconds-left')} s" in countdown.text
        banner = by_id(browser, "status-banner")
        wait(browser, lambda d: banner.is_displayed(), message="no status banner for the rate limit")
        assert banner.text == output(browser, "status", "message")
        screenshot(browser, "rate-limited")
    finally:
        github.reset()


def test_unreachable_github_shows_the_status_banner(own_bff, browser, screenshot):
    open_page(browser, own_bff)
    banner = by_id(browser, "status-banner")
    assert not banner.is_displayed()
    message = "GitHub cannot be reached; results may be out of date."
    body = json.dumps({"reachable": False, "message": message}).encode()
    request = urllib.request.Request(f"{own_bff.url}/api/_test/status", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5):
        pass
    wait(browser, lambda d: banner.is_displayed() and banner.text == message, message="no unreachable banner")
    assert "banner-error" in banner.get_attribute("class")
    screenshot(browser, "unreachable")
