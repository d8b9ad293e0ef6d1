"""A phone following a class: when a poll opens, the page is loaded again (the server withholds
the poll's answer: static/classroom.js matchWithheld), and the phone lands at the slide's
section heading, not where the browser had it scrolled nor below it as sections and figures
above it are laid out for the phone."""
import re

from playwright.sync_api import expect

# the current slide's section (.section.current) and its heading, where the phone's screen is
WHERE = """() => {
  const s = document.querySelector('.section.current');
  const h = s && s.querySelector('h2');
  const panel = document.getElementById('class-panel').getBoundingClientRect();
  return s ? {id: s.id, top: h.getBoundingClientRect().top, panel: panel.bottom,
              screen: window.innerHeight, y: window.scrollY} : null;
}"""
UNDER_THE_PANEL = ("() => { const w = (" + WHERE + ")(); "
                   "return w && w.panel - 1 <= w.top && w.top <= w.panel + 80; }")


def test_a_phone_lands_at_the_slides_heading_after_the_poll_reload(browser, live_server,
                                                                     class_store):
    contexts = [browser.new_context(viewport={"width": 1280, "height": 800}),
                browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                    has_touch=True)]
    teacher, phone = [c.new_page() for c in contexts]
    for p in (teacher, phone):
        p.set_default_navigation_timeout(180_000)
    try:
        teacher.goto(live_server + "/?present=1&tour=1")
        teacher.get_by_role("button", name="Start a class session").click()
        code_box = teacher.locator(".class-code")
        expect(code_box).to_have_text(re.compile(r"^[A-Z2-9]{4} [A-Z2-9]{3}$"))
        code = code_box.inner_text().replace(" ", "")
        phone.goto(live_server + "/class")
        phone.get_by_label("Class code").fill(code)
        phone.get_by_role("button", name="Join").click()
        expect(phone.get_by_text("Following the teacher")).to_be_visible()
        teacher.keyboard.press("ArrowRight")
        teacher.keyboard.press("ArrowRight")
        expect(phone.locator("#tour-now")).to_have_text("3")
        # the poll: the phone's page is loaded again without the withheld answer
        phone.evaluate("() => { window.__before_poll = true; }")   # gone once loaded again
        teacher.get_by_role("button", name=re.compile("^Class menu")).click()
        teacher.get_by_label("Class poll").select_option(label="The next token")
        teacher.get_by_role("button", name="Open the poll").click()
        expect(phone.get_by_text("Class poll: The next token")).to_be_visible()
        phone.wait_for_function("() => window.__before_poll === undefined")
        # the heading just under the class panel, which heads the page with the poll in it:
        # in view, not hidden under the panel nor a screen below it
        phone.wait_for_function(UNDER_THE_PANEL)
        seen = phone.evaluate(WHERE)
        assert seen["id"] == "embeddings" and seen["y"] > 0, seen
        assert seen["panel"] - 1 <= seen["top"] <= seen["panel"] + 80, seen
    finally:
        for c in contexts:
            c.close()
