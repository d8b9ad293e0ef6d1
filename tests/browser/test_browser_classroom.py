"""A class in Chromium: a teacher and three students in separate browser contexts (one a 390 px
phone). They join by code, follow a slide change, answer a poll, see the reveal with the class
beside the model, and a student steps away and comes back."""
import re

import numpy as np
from playwright.sync_api import expect

from web.presentation.tokens import plain


def model_top(live_app):
    """The model's first next token for the default prompt, as the logits section writes it."""
    lm = live_app.extensions["explainer"].default_model
    ids = lm.tokenizer.encode_ordinary(lm.default_prompt)
    top = int(np.argmax(lm.model.forward(ids)[-1]))
    return plain(lm.tokenizer.decode_single_token_bytes(top))


def errors_of(page):
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return errors


def test_a_teacher_and_three_students(browser, live_server, live_app, class_store):
    contexts = [browser.new_context(viewport={"width": 1280, "height": 800})]
    contexts += [browser.new_context(viewport={"width": 1000, "height": 800}) for _ in range(2)]
    contexts += [browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                     has_touch=True)]
    teacher, *students = [c.new_page() for c in contexts]
    errors = [errors_of(p) for p in (teacher, *students)]
    for p in (teacher, *students):
        p.set_default_navigation_timeout(180_000)
    try:
        teacher.goto(live_server + "/?present=1&tour=1")
        teacher.get_by_role("button", name="Start a class session").click()
        code_box = teacher.locator(".class-code")
        expect(code_box).to_have_text(re.compile(r"^[A-Z2-9]{4} [A-Z2-9]{3}$"))
        code = code_box.inner_text().replace(" ", "")
        qr = teacher.get_by_role("img", name="QR code of the join link")
        expect(qr).to_be_visible()      # at its width and height attributes' size at once:
        # the image itself is read once it has loaded (Playwright's wait, bounded)
        teacher.wait_for_function("img => img.complete", arg=qr.element_handle())
        assert qr.evaluate("img => img.naturalWidth") > 100

        # join by code, typed in lower case with a dash
        for s in students:
            s.goto(live_server + "/class")
            s.get_by_label("Class code").fill(code[:4].lower() + "-" + code[4:].lower())
            s.get_by_role("button", name="Join").click()
            expect(s.get_by_text("Following the teacher")).to_be_visible()
            expect(s.locator("#tour-now")).to_have_text("1")
        expect(teacher.get_by_text("3 people have joined")).to_be_visible()

        # the teacher moves to the next slide: every student follows
        teacher.keyboard.press("ArrowRight")
        expect(teacher.locator("#tour-now")).to_have_text("2")
        for s in students:
            expect(s.locator("#tour-now")).to_have_text("2")

        # a class poll on the next token, from the class menu (the join code folded away to
        # a chip when the teacher moved on); the phone answers too
        teacher.get_by_role("button", name=re.compile("^Class menu")).click()
        teacher.get_by_label("Class poll").select_option(label="The next token")
        teacher.get_by_role("button", name="Open the poll").click()
        for s, guess in zip(students, ["wife", "house", "Wife"], strict=True):
            expect(s.get_by_text("Class poll: The next token")).to_be_visible()
            s.get_by_label("Your answer").fill(guess)
            s.get_by_role("button", name="Send my answer").click()
            expect(s.get_by_text(f"Your answer: {guess}.")).to_be_visible()
        phone = students[2]
        box = phone.get_by_role("button", name="Send my answer").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        # the projector shows how many answered, not what
        expect(teacher.locator(".class-count")).to_have_text("3 of 3 answered")
        expect(teacher.locator("#class-panel")).not_to_contain_text("house")

        teacher.get_by_role("button", name="Reveal the answers").click()
        top = model_top(live_app)
        for p in (teacher, *students):
            expect(p.locator(".class-model strong")).to_have_text(top)
            table = p.get_by_role("table", name="The class's answers")
            expect(table.locator("tbody tr")).to_have_count(2)
            expect(table.locator("tbody tr").first.locator("td").nth(1)).to_have_text("2")
            expect(p.locator(".class-favourite")).to_contain_text("(66.7% of the class)")
            expect(p.locator(".class-figure .main-svg").first).to_be_visible()

        # one student steps away; the teacher moves on; back to following, they catch up
        away = students[0]
        away.get_by_role("button", name="Step away to explore").click()
        expect(away.get_by_role("button", name="Follow the teacher")).to_be_visible()
        teacher.keyboard.press("ArrowRight")
        expect(students[1].locator("#tour-now")).to_have_text("3")
        expect(away.locator("#tour-now")).to_have_text("2")
        away.get_by_role("button", name="Follow the teacher").click()
        expect(away.locator("#tour-now")).to_have_text("3")
        expect(away.get_by_text("Following the teacher")).to_be_visible()
        assert errors == [[], [], [], []]
    finally:
        for c in contexts:
            c.close()
