"""The greeting page: the unidirectional example rendered from the `greeting` view model."""

from pages import by_id, open_page, wait


def test_greeting_button_follows_name_and_label_is_upper_cased(bff, browser, screenshot):
    open_page(browser, bff, "greeting.html")
    button = by_id(browser, "greet-button")
    name = by_id(browser, "name")
    assert not button.is_enabled(), "the button starts disabled: the name is empty"
    assert by_id(browser, "greeting-label").text == ""

    name.send_keys("Ada")
    wait(browser, lambda d: button.is_enabled(), message="buttonEnabled did not arrive")
    button.click()
    wait(browser, lambda d: by_id(d, "greeting-label").text == "Hello, ADA!")
    screenshot(browser, "greeting")

    name.clear()
    name.send_keys("x\b")  # an edit that leaves the field empty sends "" to the server
    wait(browser, lambda d: not button.is_enabled(), message="button stayed enabled for an empty name")


def test_enter_greets(bff, browser):
    open_page(browser, bff, "greeting.html")
    by_id(browser, "name").send_keys("grace\n")
    wait(browser, lambda d: by_id(d, "greeting-label").text == "Hello, GRACE!")
