"""A reload or a shared link opens at the section whose state the address holds: a control's
answer adds that section as the address's fragment (#tiling), and the page scrolls there and
stays there while the sections around it load, until the reader scrolls (static/anchor.js)."""
import re

from playwright.sync_api import expect

TILING_URL = re.compile(r"[?&]til_bq=8\b[^#]*#tiling$")


def reload(page):
    """The browser's own reload (the fixture's loads every section and scrolls to the top)."""
    type(page).reload(page)


def top_of(locator) -> float:
    return locator.evaluate("el => el.getBoundingClientRect().top")


def at_the_top(page, heading):
    """The heading is in the window, in its top quarter (below the sticky map of sections)."""
    expect(heading).to_be_in_viewport()
    height = page.viewport_size["height"]
    assert 0 <= top_of(heading) < height / 4, top_of(heading)
    assert page.evaluate("() => window.scrollY") > 0


def test_a_control_names_its_section_and_a_reload_opens_there(page, page_errors):
    page.goto_first_screen("/")
    heading = page.get_by_role("heading", name="Attention tiling")
    heading.scroll_into_view_if_needed()              # the section loads as it nears the screen
    section = page.locator("#tiling")
    slider = section.get_by_role("slider", name="Query tile")
    slider.fill("8")
    expect(page).to_have_url(TILING_URL)
    reload(page)
    expect(page).to_have_url(TILING_URL)
    at_the_top(page, heading)
    expect(slider).to_have_value("8")                 # the section itself, loaded at its place
    page.wait_for_load_state("networkidle")           # the sections around it loaded and grew
    at_the_top(page, heading)
    # the reader scrolls up: the page lets them (sections above load, nothing pulls them back)
    before = page.evaluate("() => window.scrollY")
    page.mouse.wheel(0, -1500)
    page.wait_for_function("y => window.scrollY < y - 1000", arg=before)
    page.wait_for_load_state("networkidle")
    assert page.evaluate("() => window.scrollY") < before - 1000
    assert page_errors == []


def test_a_shared_link_opens_at_its_section(page, page_errors):
    page.goto_first_screen("/")
    heading = page.get_by_role("heading", name="Attention tiling")
    heading.scroll_into_view_if_needed()
    page.locator("#tiling").get_by_role("slider", name="Query tile").fill("8")
    expect(page).to_have_url(TILING_URL)
    link = page.url
    other = page.context.new_page()                   # a student opens the shared link
    errors = []
    other.on("pageerror", lambda e: errors.append(str(e)))
    other.goto(link)
    shared = other.get_by_role("heading", name="Attention tiling")
    expect(other.locator("#tiling").get_by_role("slider", name="Query tile")).to_have_value("8")
    other.wait_for_load_state("networkidle")
    at_the_top(other, shared)
    assert errors == [] and page_errors == []


def test_the_fragment_follows_the_last_section_changed(page):
    page.goto_first_screen("/")
    page.get_by_role("heading", name="Attention tiling").scroll_into_view_if_needed()
    page.locator("#tiling").get_by_role("slider", name="Key tile").fill("4")
    expect(page).to_have_url(re.compile(r"til_bk=4[^#]*#tiling$"))
    # a "Go deeper" disclosure opened in another section names that section
    page.get_by_role("heading", name="KV cache", exact=False).first.scroll_into_view_if_needed()
    kv = page.locator("#kvcache")
    kv.locator("details.deeper > summary").first.click()
    expect(page).to_have_url(re.compile(r"open=[^#]*#kvcache$"))
    expect(page).to_have_url(re.compile(r"til_bk=4"))  # the state is all still there
    # a prompt change is the whole page's: the address has no fragment then
    page.get_by_label("Prompt", exact=True).fill("Emma smiled")
    expect(page).to_have_url(re.compile(r"prompt=Emma(%20|\+)smiled[^#]*$"))


def test_the_guided_tour_keeps_its_own_place(page, page_errors):
    """With the tour open in the address, its step places the page, not the fragment."""
    page.goto_first_screen("/?tour=1#tiling")
    expect(page.get_by_role("heading", name="Attention tiling")).not_to_be_in_viewport()
    page.goto_first_screen("/?q_bits=4#nosuchsection")          # an unknown fragment: the top
    expect(page.get_by_role("heading", name="Attention tiling")).not_to_be_in_viewport()
    assert page.evaluate("() => window.scrollY") == 0
    assert page_errors == []
