"""A class in Chromium, at the room's edges: a phone refused as busy keeps its class and comes
back by itself, and a following student's page withholds an open poll's answer until the
reveal, then shows it."""
import json
import re
import urllib.request
import uuid

from playwright.sync_api import expect

NOTE = "Withheld until the reveal."


def new_session(live_server, query):
    """A session started as the teacher's page does (POST /class/new with the page's state)."""
    req = urllib.request.Request(live_server + "/class/new", method="POST",
                                 data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["code"]


def test_a_phone_refused_as_busy_keeps_its_class_and_comes_back_by_itself(
        browser, live_server, live_app, class_store):
    query = "prompt=" + urllib.request.quote(f"A busy room {uuid.uuid4().hex[:6]}")
    code = new_session(live_server, query)
    gate = live_app.extensions["explainer_gate"]
    waiting, held = gate.waiting, 0
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    phone = context.new_page()
    try:
        gate.waiting = 0
        for _ in range(gate.slots):            # every computing slot taken: a class at once
            gate.acquire()
            held += 1
        response = phone.goto(live_server + f"/class/{code}")
        assert response.status == 503
        expect(phone.get_by_role("heading", name="The server is busy")).to_be_visible()
        assert phone.url.endswith(f"#class={code}")
        expect(phone.get_by_role("link", name="Try again now")).to_have_attribute(
            "href", re.compile(f"#class={code}$"))
        for _ in range(held):
            gate.release()
        held = 0
        expect(phone.get_by_text("Following the teacher")).to_be_visible(timeout=15_000)
        expect(phone.locator("#prompt-input")).to_have_value(re.compile("^A busy room"))
    finally:
        for _ in range(held):
            gate.release()
        gate.waiting = waiting
        context.close()


def test_a_following_student_sees_no_answer_until_the_reveal(browser, live_server, live_app,
                                                             class_store):
    teacher_ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    student_ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    teacher, student = teacher_ctx.new_page(), student_ctx.new_page()
    for p in (teacher, student):
        p.set_default_navigation_timeout(120_000)
    try:
        teacher.goto(live_server + "/?present=1&tour=1&prompt=" +
                     urllib.request.quote(f"The old house stood {uuid.uuid4().hex[:4]}"))
        teacher.get_by_role("button", name="Start a class session").click()
        code_box = teacher.locator(".class-code")
        expect(code_box).to_have_text(re.compile(r"^[A-Z2-9]{4} [A-Z2-9]{3}$"))
        code = code_box.inner_text().replace(" ", "")
        student.goto(live_server + f"/class/{code}")
        expect(student.get_by_text("Following the teacher")).to_be_visible()
        expect(student.locator("#overview").get_by_text("Top 5").first).to_be_attached()
        assert student.locator("body").get_attribute("data-withheld") == ""

        teacher.get_by_label("Class poll").select_option(label="The next token")
        teacher.get_by_role("button", name="Open the poll").click()
        # the student's page is loaded again, without the answer: in the page's source too
        expect(student.locator("#overview").get_by_text(NOTE)).to_be_visible()
        expect(student.get_by_text("Class poll: The next token")).to_be_visible()
        source = student.content()
        assert 'data-answer-of="next-token"' not in source and 'data-predict="next-token"' \
            not in source
        assert NOTE not in teacher.content()                    # the teacher's is whole
        student.get_by_label("Your answer").fill("door")
        student.get_by_role("button", name="Send my answer").click()
        expect(student.get_by_text("Your answer: door.")).to_be_visible()
        expect(teacher.locator(".class-count")).to_have_text("1 of 1 answered")

        teacher.get_by_role("button", name="Reveal the answers").click()
        expect(student.locator(".class-summary")).to_contain_text("1 of 1 who joined")
        expect(student.locator("#overview").get_by_text(NOTE)).to_have_count(0)
        expect(student.locator("#overview").get_by_text("Top 5").first).to_be_attached()
        expect(student.locator(".class-model strong")).to_be_visible()
    finally:
        teacher_ctx.close()
        student_ctx.close()
