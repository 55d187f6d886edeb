"""Sessions, the event stream and upstream faults: the page recovers and says what happened."""

import json
import urllib.request

from selenium.webdriver.common.by import By

from pages import by_id, open_page, output, row_ids, search, session_id, wait, wait_until_live


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
    assert browser.execute_script("return window.bffClient.streamOpen") is False
    # An input while paused still reaches the server; its output arrives with the resumed stream's snapshot.
    by_id(browser, "query").send_keys("while hidden")
    browser.execute_script("window.__visibility = 'visible'; document.dispatchEvent(new Event('visibilitychange'));")
    wait_until_live(browser)
    wait(browser, lambda d: output(d, "search", "query") == "while hidden")


def test_rate_limit_has_one_sentence_a_countdown_to_retry_at_and_ends_by_itself(github, own_bff, browser, screenshot):
    open_page(browser, own_bff)
    search(browser, "swift")
    wait(browser, lambda d: output(d, "search", "loadMoreEnabled") is True, message="no next page to load")
    load_more = by_id(browser, "load-more")
    search_button = by_id(browser, "search-button")
    assert load_more.is_enabled() and search_button.is_enabled()
    github.rate_limit(4)
    try:
        # Load-mores within a page of 100 GitHub gave already are the cache's (no call); one that needs
        # the next page of 100 reaches GitHub and its rate limit. At most four pages of 30 until it does.
        for _ in range(5):
            if output(browser, "search", "retryAt") is not None:
                break
            before = len(row_ids(browser))
            if output(browser, "search", "loadMoreEnabled") is True:
                load_more.click()
            # Either the page came (from the cache) or the limit did.
            wait(browser, lambda d: output(d, "search", "retryAt") is not None
                 or (len(row_ids(d)) > before and output(d, "search", "isLoading") is False),
                 message="neither a page nor the rate limit came")
        wait(browser, lambda d: output(d, "search", "retryAt") is not None, message="no retryAt")
        assert output(browser, "search", "error")["kind"] == "rateLimited"

        # One sentence about the rate limit: the app-wide status banner; the search area repeats nothing.
        banner = by_id(browser, "status-banner")
        wait(browser, lambda d: banner.is_displayed(), message="no status banner for the rate limit")
        assert banner.text == output(browser, "status", "message")
        assert output(browser, "search", "errorMessage") is None
        assert not by_id(browser, "error").is_displayed()
        page_text = browser.find_element(By.TAG_NAME, "body").text
        assert page_text.count("rate limit") == 1, page_text

        # The countdown counts to the view model's retryAt.
        countdown = by_id(browser, "retry-countdown")
        assert countdown.is_displayed()
        retry_at = output(browser, "search", "retryAt")
        expected = browser.execute_script(
            "return Math.max(0, Math.ceil((Date.parse(arguments[0]) - Date.now()) / 1000))", retry_at)
        # The number and the text read together: the countdown may tick between two separate reads.
        left, text = browser.execute_script(
            "return [Number(arguments[0].dataset.secondsLeft), arguments[0].innerText]", countdown)
        assert abs(left - expected) <= 1 and 0 < left <= 5, (left, expected, retry_at)
        assert f"{left} s" in text, (left, text)

        # Load more and search are disabled by the view model's outputs, not by loading.
        assert output(browser, "search", "isLoading") is False
        assert output(browser, "search", "loadMoreEnabled") is False
        assert load_more.is_displayed() and not load_more.is_enabled()
        assert output(browser, "search", "searchEnabled") is False
        assert not search_button.is_enabled()
        browser.execute_script("window.scrollTo(0, 0)")
        screenshot(browser, "rate-limited")

        # The view model ends the limit at retryAt: the countdown goes, the controls come back.
        github.reset()
        wait(browser, lambda d: output(d, "search", "retryAt") is None, timeout=10, message="retryAt stayed")
        wait(browser, lambda d: not countdown.is_displayed(), message="the countdown stayed")
        wait(browser, lambda d: load_more.is_enabled() and search_button.is_enabled(),
             message="load more / search stayed disabled")
        wait(browser, lambda d: not banner.is_displayed(), message="the rate-limit sentence outlived the limit")
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
