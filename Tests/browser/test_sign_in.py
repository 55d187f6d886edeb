"""Sign in with GitHub from the page: the button, the simulator's authorize page, the person shown
(avatar and login), a search on their own budget, and sign-out turning every open tab anonymous."""

from selenium.webdriver.common.by import By

from pages import by_id, open_page, output, search, wait, wait_until_live


def signed_in_as(driver):
    return driver.execute_script(
        "const s = document.getElementById('signed-in');"
        "return s.hidden ? null : document.getElementById('account-login').textContent")


def sign_in_shown(driver):
    return driver.execute_script("return !document.getElementById('sign-in').hidden")


def test_sign_in_search_and_sign_out_every_tab(signin_bff, browser, screenshot):
    open_page(browser, signin_bff)
    wait(browser, sign_in_shown, message="no 'Sign in with GitHub' while signed out")
    assert output(browser, "account", "signInEnabled") is True
    assert output(browser, "account", "signedIn") is False
    first_session = browser.execute_script("return window.bffClient.sessionId")

    # To the simulator's authorize page, approve as a named person, and back.
    by_id(browser, "sign-in").click()
    wait(browser, lambda d: "/login/oauth/authorize" in d.current_url, message="not sent to GitHub")
    login = browser.find_element(By.NAME, "login")
    login.clear()
    login.send_keys("mona")
    browser.find_element(By.ID, "authorize").click()
    wait(browser, lambda d: d.current_url.startswith(signin_bff.url + "/"), message="not sent back")
    wait_until_live(browser)
    wait(browser, lambda d: signed_in_as(d) == "mona", message="the page does not show the person")
    assert not sign_in_shown(browser)
    assert browser.execute_script("return window.bffClient.sessionId") != first_session
    avatar = by_id(browser, "account-avatar").get_attribute("src")
    assert avatar.startswith("https://avatars.githubusercontent.com/"), avatar
    # The cookie is HttpOnly: the page's scripts cannot read it.
    assert "bff-login" not in browser.execute_script("return document.cookie")
    search(browser, "swift")
    wait(browser, lambda d: (output(d, "account", "rateLimit") or {}).get("limit") is not None,
         message="the person's own budget is not shown")
    screenshot(browser, "signed-in")

    # A second tab of the same browser is the same person.
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    open_page(browser, signin_bff)
    wait(browser, lambda d: signed_in_as(d) == "mona", message="the second tab is not signed in")
    second = browser.current_window_handle

    # Sign out in the first: every tab goes anonymous.
    browser.switch_to.window(first)
    by_id(browser, "sign-out").click()
    for handle in (first, second):
        browser.switch_to.window(handle)
        wait(browser, sign_in_shown, message="a tab still shows the person after sign-out")
        wait(browser, lambda d: output(d, "account", "signedIn") is False)
        assert signed_in_as(browser) is None
    screenshot(browser, "signed-out")
