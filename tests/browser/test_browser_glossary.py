"""Glossary terms in Chromium: a term's definition shows on keyboard focus, a tap or click
toggles it, Escape hides it, and it stays inside the window (templates/macros.html `term`,
static/glossary.js)."""
import re

from playwright.sync_api import expect

from web.presentation.glossary import GLOSSARY

RESIDUAL = GLOSSARY["residual stream"]


def definition_of(page, button):
    return page.locator("#" + button.get_attribute("aria-describedby"))


def inside_the_window(page, locator):
    box = locator.bounding_box()
    width = page.viewport_size["width"]
    return box["x"] >= 0 and box["x"] + box["width"] <= width


def test_tab_to_a_term_shows_its_definition_click_toggles_escape_hides(page, page_errors):
    page.goto_first_screen("/")                   # the overview's terms: the first screen
    # the overview's (each section marks its own first use too: the first on the page)
    term = page.get_by_role("button", name="residual stream", exact=True).first
    expect(term).to_have_accessible_description(re.compile(re.escape(RESIDUAL[:40])))
    definition = definition_of(page, term)
    expect(definition).to_be_hidden()
    # Tab from the link just before it, in the overview's blocks box
    page.get_by_role("link", name=re.compile(r"blocks$")).first.focus()
    page.keyboard.press("Tab")
    expect(term).to_be_focused()
    expect(definition).to_be_visible()
    expect(definition).to_contain_text(RESIDUAL)
    assert inside_the_window(page, definition)
    page.keyboard.press("Escape")
    expect(definition).to_be_hidden()
    expect(term).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(definition).to_be_hidden()
    # a click opens it, a second click closes it (the pointer still over it)
    term.click()
    expect(definition).to_be_visible()
    expect(term).to_have_attribute("aria-expanded", "true")
    term.click()
    expect(definition).to_be_hidden()
    expect(term).to_have_attribute("aria-expanded", "false")
    assert page_errors == []


def test_a_tap_toggles_a_definition_on_a_phone_and_it_fits_the_screen(browser, live_server):
    context = browser.new_context(base_url=live_server, viewport={"width": 390, "height": 844},
                                  has_touch=True, is_mobile=True, device_scale_factor=2)
    try:
        page = context.new_page()
        page.goto("/")
        term = page.get_by_role("button", name="grouped-query", exact=True).first

        definition = definition_of(page, term)
        term.scroll_into_view_if_needed()
        term.tap()
        expect(definition).to_be_visible()
        expect(definition).to_contain_text(GLOSSARY["grouped-query attention"])
        assert inside_the_window(page, definition)
        term.tap()
        expect(definition).to_be_hidden()
        term.tap()
        expect(definition).to_be_visible()
        page.get_by_role("heading", name="How an LLM turns a prompt into text").tap()  # elsewhere
        expect(definition).to_be_hidden()
    finally:
        context.close()


def test_the_tour_defines_a_term_at_its_first_use(page):
    page.goto_first_screen("/?tour=5")            # the tour's own box
    tour = page.get_by_role("complementary", name=re.compile("Guided tour"))
    term = tour.get_by_role("button", name="residual stream", exact=True)
    definition = definition_of(page, term)
    term.click()
    expect(definition).to_be_visible()
    expect(definition).to_contain_text(RESIDUAL)
    page.keyboard.press("Escape")                 # hides the definition, leaves the tour open
    expect(definition).to_be_hidden()
    expect(tour).to_be_visible()
