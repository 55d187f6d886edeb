"""Page helpers for the browser tests: open a page on a fresh session and wait for what it shows."""

from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

TIMEOUT = 15


def wait(driver, condition, timeout=TIMEOUT, message=""):
    """Waits until `condition(driver)` is truthy and returns its value."""
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition, message)


def by_id(driver, element_id):
    return driver.find_element(By.ID, element_id)


def open_page(driver, server, page="index.html"):
    """Loads `page` and waits until its event stream is open and the first snapshot arrived."""
    driver.get(f"{server.url}/{page}")
    wait_until_live(driver)


def wait_until_live(driver, timeout=TIMEOUT):
    try:
        wait(driver, lambda d: d.execute_script(
            "return document.documentElement.dataset.connection === 'open' && window.bffClient.seq >= 0"),
            timeout)
    except TimeoutException:
        # What the page was doing, for a failure that shows up once in many runs.
        state = driver.execute_script(
            "const c = window.bffClient; return {connection: document.documentElement.dataset.connection, "
            "transport: c && c.streamTransport, seq: c && c.seq, session: c && c.sessionId, "
            "errors: window.__pageErrors}")
        console = [entry.get("message", "")[:300] for entry in driver.get_log("browser")][-15:]
        raise TimeoutException(f"the page's event stream did not open: {state}; console: {console}") from None


def session_id(driver):
    return driver.execute_script("return window.bffClient.sessionId")


def output(driver, view_model, name):
    """The page's local copy of an output (what the client received from the stream)."""
    return driver.execute_script("return window.bffClient.get(arguments[0], arguments[1])", view_model, name)


def row_ids(driver):
    """The result rows' repository ids, read in one script: element by element, a row the page replaced
    between the look-up and the read raised StaleElementReferenceException."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#results > li.repo'), r => r.getAttribute('data-repo-id'))")


def search(driver, query):
    """Types `query` into an empty field, presses Enter and waits until results are shown."""
    field = by_id(driver, "query")
    field.clear()
    field.send_keys(query)
    wait(driver, lambda d: output(d, "search", "query") == query, message="query did not reach the server")
    field.send_keys("\n")
    wait_for_results(driver)


def wait_for_results(driver, more_than=0):
    wait(driver, lambda d: len(row_ids(d)) > more_than and output(d, "search", "isLoading") is False,
         message=f"no more than {more_than} result rows appeared")
    return row_ids(driver)


def open_on_session(driver, server, session, page="index.html"):
    """Loads `page` at `server` resuming `session` (a session made elsewhere, e.g. at another node):
    the id goes into the tab's sessionStorage first, from a document of the same origin."""
    driver.get(f"{server.url}/favicon.svg")
    driver.execute_script("sessionStorage.setItem('bff.sessionId', arguments[0])", session)
    open_page(driver, server, page)


RECORD_POSTS = """
    // Every POST the page makes, when (ms), with its Idempotency-Key, its answer's status (0: no
    // answer), Retry-After and the inputSeq of a 202: the test's view of what went over the wire.
    window.__posts = [];
    const original = window.fetch;
    window.fetch = async (url, init = {}) => {
        const method = init.method || 'GET';
        if (method !== 'POST') return original(url, init);
        const entry = {path: new URL(String(url), location.href).pathname, at: performance.now(),
                       key: (init.headers || {})['Idempotency-Key'] || null, status: null, inputSeq: null,
                       retryAfter: null};
        window.__posts.push(entry);
        try {
            const response = await original(url, init);
            entry.status = response.status;
            entry.retryAfter = response.headers.get('Retry-After');
            if (response.status === 202) entry.inputSeq = (await response.clone().json()).inputSeq;
            return response;
        } catch (error) {
            entry.status = 0;
            throw error;
        }
    };
"""


def record_posts(driver):
    """Starts recording the page's POSTs (see RECORD_POSTS); read them with `posts(driver)`."""
    driver.execute_script(RECORD_POSTS)


def posts(driver):
    return driver.execute_script("return window.__posts")
