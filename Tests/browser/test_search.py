"""The search screen against the real server and the GitHub simulator."""

import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import make_driver
from pages import by_id, open_page, output, row_ids, search, wait, wait_for_results


def test_search_button_is_disabled_while_query_is_blank(bff, browser, screenshot):
    open_page(browser, bff)
    button = by_id(browser, "search-button")
    field = by_id(browser, "query")
    assert not button.is_enabled()
    screenshot(browser, "search-empty")

    field.send_keys("swift")
    wait(browser, lambda d: button.is_enabled(), message="searchEnabled did not turn true")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.BACKSPACE)
    wait(browser, lambda d: not button.is_enabled(), message="button stayed enabled for an empty query")
    field.send_keys("   ")
    wait(browser, lambda d: output(d, "search", "query") == "   ")
    assert not button.is_enabled(), "a query of spaces is blank"


def test_no_result_count_before_a_search(bff, browser):
    open_page(browser, bff)
    assert output(browser, "search", "totalCount") is None
    assert by_id(browser, "result-count").text == "", "a count was shown before any search"
    search(browser, "swift")
    total = output(browser, "search", "totalCount")
    assert by_id(browser, "result-count").text == f"{total:,} repositories"


def test_type_and_search_shows_results(bff, browser, screenshot):
    open_page(browser, bff)
    search(browser, "swift")
    repositories = output(browser, "search", "repositories")
    rows = browser.find_elements(By.CSS_SELECTOR, "#results > li.repo")
    assert len(rows) == len(repositories) > 0
    first = rows[0]
    assert first.find_element(By.CSS_SELECTOR, ".repo-open").text == repositories[0]["fullName"]
    assert first.find_element(By.CSS_SELECTOR, "img.avatar").get_attribute("alt") == repositories[0]["owner"]
    if repositories[0]["description"]:
        assert first.find_element(By.CSS_SELECTOR, ".repo-description").text == repositories[0]["description"]
    # The title is the full number in the page's locale (the browser runs with --lang=en-US).
    stars = repositories[0]["stars"]
    assert first.find_element(By.CSS_SELECTOR, ".stars").get_attribute("title") == f"{stars:,} stars"
    assert first.find_element(By.CSS_SELECTOR, "time.updated").get_attribute("datetime") == repositories[0]["updatedAt"]
    total = output(browser, "search", "totalCount")
    assert f"{total:,}" in by_id(browser, "result-count").text
    assert not by_id(browser, "loading").is_displayed()
    assert by_id(browser, "search-button").is_enabled()
    screenshot(browser, "search-results")


def test_enter_right_after_typing_searches(bff, browser):
    # Inputs go in order: the query reaches the server before the submit that Enter sends, even when
    # the button has not been enabled yet.
    open_page(browser, bff)
    query = "parser"
    by_id(browser, "query").send_keys(query + "\n")
    wait_for_results(browser)
    assert output(browser, "search", "query") == query


def test_sort_selector_is_forwarded(bff, browser):
    open_page(browser, bff)
    by_id(browser, "sort").send_keys("Most stars")
    wait(browser, lambda d: output(d, "search", "sort") == "stars", message="sort did not reach the server")


def test_load_more_appends_without_duplicates(bff, browser):
    open_page(browser, bff)
    search(browser, "swift")
    wait(browser, lambda d: output(d, "search", "hasMore") is True, message="the first page has no next page")
    first_page = row_ids(browser)
    button = by_id(browser, "load-more")
    assert button.is_enabled() is output(browser, "search", "loadMoreEnabled") is True
    browser.execute_script("arguments[0].scrollIntoView()", button)
    wait(browser, lambda d: button.is_enabled())
    button.click()  # the scroll may already have asked; a second loadMore while loading is a no-op
    ids = wait_for_results(browser, more_than=len(first_page))
    assert ids[:len(first_page)] == first_page, "earlier rows stay in place"
    assert len(ids) == len(set(ids)), f"duplicate rows: {ids}"
    assert len(ids) == len(output(browser, "search", "repositories"))


def test_scrolling_to_the_end_loads_more(bff, github):
    driver = make_driver(width=1000, height=600)
    try:
        open_page(driver, bff)
        search(driver, "server")
        before = len(row_ids(driver))
        # Every loadMore input the page posts is counted (each spends one of GitHub's calls).
        driver.execute_script("""
            window.loadMoreSent = 0;
            const send = window.fetch;
            window.fetch = (url, init) => {
                if (String(url).endsWith("/search/loadMore")) window.loadMoreSent += 1;
                return send(url, init);
            };""")
        driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
        ids = wait_for_results(driver, more_than=before)
        assert len(ids) == len(set(ids))
        assert len(ids) == 2 * before, "one scroll loaded one page"
        assert driver.execute_script("return window.loadMoreSent") == 1, "one scroll, one loadMore"
    finally:
        driver.quit()


def test_hostile_descriptions_render_as_text(bff, github, browser, screenshot):
    open_page(browser, bff)
    # An injected script would set the flag or call alert (the simulator's hostile texts do).
    browser.execute_script("window.__xss = false; window.alert = window.confirm = window.prompt = "
                           "() => { window.__xss = true; };")
    search(browser, github.hostile_query)
    repositories = output(browser, "search", "repositories")
    hostile = [r for r in repositories if r["description"] and "<" in r["description"]]
    assert hostile, "the simulator returned no hostile descriptions for this query"
    for row in browser.find_elements(By.CSS_SELECTOR, "#results > li.repo"):
        repo = next(r for r in repositories if str(r["id"]) == row.get_attribute("data-repo-id"))
        description = row.find_element(By.CSS_SELECTOR, ".repo-description")
        assert description.get_attribute("textContent") == (repo["description"] or "")
        assert description.find_elements(By.CSS_SELECTOR, "*") == [], "markup was parsed into elements"
    injected = browser.execute_script(
        "return document.querySelectorAll('#results script, #results svg, #results img:not(.avatar)').length")
    assert injected == 0
    assert browser.execute_script("return window.__xss") is False, "an injected script ran"
    screenshot(browser, "search-hostile")


def test_selecting_a_row_opens_the_repository_url(bff, browser, screenshot):
    open_page(browser, bff)
    browser.execute_script(
        "window.__opened = []; window.open = (...args) => { window.__opened.push(args); return null; };")
    search(browser, "swift")
    repositories = output(browser, "search", "repositories")

    # The highlight is the page's own state, set by the click before any reply. A DOM query after
    # click() could race the `deselect` signal on a fast loopback, so a MutationObserver installed
    # before the click records every row that became `.repo.selected`.
    browser.execute_script("""
        window.__selected = [];
        new MutationObserver((records) => {
            for (const r of records) {
                if (r.target.matches('.repo.selected')) window.__selected.push(r.target.dataset.repoId);
            }
        }).observe(document.getElementById('results'),
                   {subtree: true, attributes: true, attributeFilter: ['class']});
    """)
    first_row = browser.find_elements(By.CSS_SELECTOR, "#results > li.repo")[0]
    browser.find_elements(By.CSS_SELECTOR, "#results .repo-open")[0].click()
    assert browser.execute_script("return window.__selected") == [first_row.get_attribute("data-repo-id")], \
        "the clicked row was not highlighted as .repo.selected"
    opened = wait(browser, lambda d: d.execute_script("return window.__opened.length && window.__opened"))
    assert opened[0] == [repositories[0]["url"], "_blank", "noopener"]
    wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "#results .repo.selected"),
         message="the deselect signal did not clear the highlight")
    assert by_id(browser, "opened-link").get_attribute("href") == repositories[0]["url"]

    # keyboard: focus the second row's name and press Enter
    second = browser.find_elements(By.CSS_SELECTOR, "#results .repo-open")[1]
    browser.execute_script("arguments[0].focus()", second)
    second.send_keys(Keys.ENTER)
    wait(browser, lambda d: d.execute_script("return window.__opened.length") == 2)
    assert browser.execute_script("return window.__opened[1][0]") == repositories[1]["url"]
    screenshot(browser, "search-selected")


def test_phone_width_has_no_horizontal_scroll(bff, screenshot):
    driver = make_driver(width=360, height=740)
    try:
        open_page(driver, bff)
        search(driver, "swift")
        width = driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= 360, f"the page is {width}px wide at a 360px viewport"
        screenshot(driver, "search-phone")
    finally:
        driver.quit()


def test_dark_scheme(bff, screenshot):
    driver = make_driver(dark=True)
    try:
        open_page(driver, bff)
        search(driver, "swift")
        background = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(13, 17, 23)", background
        screenshot(driver, "search-dark")
    finally:
        driver.quit()


def test_pages_break_no_content_security_rule(bff, browser):
    # The browser can only report violations of a policy the server sends: check the header itself.
    with urllib.request.urlopen(f"{bff.url}/", timeout=5) as response:
        policy = response.headers.get("Content-Security-Policy")
    assert policy, "no Content-Security-Policy header on /"
    directives = {d.split()[0]: d.split()[1:] for d in (p.strip() for p in policy.split(";")) if d}
    assert "'self'" in directives.get("script-src", []), policy
    assert "'unsafe-inline'" not in policy, policy
    assert "'unsafe-eval'" not in directives.get("script-src", []), policy

    open_page(browser, bff)
    search(browser, "swift")
    violations = browser.execute_script("return window.__cspViolations")
    # Avatars from a local simulator are plain http and may be refused by img-src; nothing else may be.
    assert [v for v in violations if not v.startswith("img-src")] == []
    assert browser.execute_script("return window.__pageErrors") == []
