"""Page helpers for the browser tests: open a page on a fresh session and wait for what it shows."""

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
    wait(driver, lambda d: d.execute_script(
        "return document.documentElement.dataset.connection === 'open' && window.bffClient.seq >= 0"),
        timeout, "the page's event stream did not open")


def session_id(driver):
    return driver.execute_script("return window.bffClient.sessionId")


def output(driver, view_model, name):
    """The page's local copy of an output (what the client received from the stream)."""
    return driver.execute_script("return window.bffClient.get(arguments[0], arguments[1])", view_model, name)


def row_ids(driver):
    return [row.get_attribute("data-repo-id") for row in driver.find_elements(By.CSS_SELECTOR, "#results > li.repo")]


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
