"""bench/load_test.py's class moves the page's own controls over their whole ranges: the
controls it reads from a section's HTML are the section's sliders and selects, every value it
may pick (each end of every range, every option) is one the server answers with a 200, and the
page's followers of a change (decoding's samples after a sampling control) ask as htmx would."""
import os
import random
import re
import sys

from web.core.registry import SECTIONS
from web_support import HX, url

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
import load_test  # noqa: E402

PROMPT = "Elizabeth walked on alone, crossing field after field"


def section_html(client, sid, **query):
    r = client.get(url(f"/section/{sid}", prompt=PROMPT, **query),
                   headers={**HX, "HX-Trigger": sid})
    assert r.status_code == 200
    return r.get_data(as_text=True)


def test_range_values_run_from_min_to_max_in_steps():
    assert load_test.range_values({"min": "0", "max": "2", "step": "0.5"}) == \
        ["0", "0.5", "1", "1.5", "2"]
    assert load_test.range_values({"min": "1", "max": "8"}) == [str(i) for i in range(1, 9)]
    vals = load_test.range_values({"min": "0.05", "max": "1", "step": "0.05"})
    assert vals[0] == "0.05" and vals[-1] == "1" and len(vals) == 20


def test_every_value_the_class_may_pick_is_answered(client):
    seen = 0
    for s in SECTIONS:
        text = section_html(client, s.id)
        found = load_test.page_controls(text, s.id)[s.id]
        # the section's own sliders and selects that ask the server, each read once
        names = set(re.findall(r'<input\b[^>]*\btype="range"[^>]*\bname="([^"]+)"', text)) | \
            set(re.findall(r'<select\b[^>]*\bname="([^"]+)"', text))
        assert {c[0] for c in found["controls"]} <= names
        for name, values, target, cid in found["controls"]:
            assert values and cid
            for value in {values[0], values[-1]}:
                headers = {**HX, "HX-Trigger": cid, **({"HX-Target": target} if target else {})}
                r = client.get(url(f"/section/{s.id}", prompt=PROMPT, **{name: value}),
                               headers=headers)
                assert r.status_code == 200, (s.id, name, value, r.get_data(as_text=True)[:300])
                seen += 1
    assert seen >= 40


def test_a_change_brings_the_pages_followers_of_it(client):
    """With the decoding samples shown, a sampling control's answer names the change, and the
    student follows it with the samples' own request, as the page does."""
    student = load_test.Student(0, None, 0, 1, [], None, None)
    student.prompt = PROMPT
    student.state = {"open": "dec-beams"}
    path = student.query("/section/decoding")
    text = section_html(client, "decoding", open="dec-beams")
    assert student.seen(path, "section load", 200, text, {}) == []
    sampling = section_html(client, "sampling", open="dec-beams")
    student.seen(student.query("/section/sampling"), "section load", 200, sampling, {})
    name, values, target, cid = next(c for c in student.page["sampling"]["controls"].values()
                                     if c[0] == "s_temp")
    student.state[name] = random.Random(0).choice(values[1:])
    r = client.get(student.query("/section/sampling"),
                   headers={**HX, "HX-Trigger": cid, "HX-Target": target})
    assert r.status_code == 200 and r.headers["HX-Trigger"] == "sampling-changed"
    follow = student.seen(student.query("/section/sampling"), "sampling", 200,
                          r.get_data(as_text=True), {"HX-Trigger": r.headers["HX-Trigger"]})
    assert [(p.split("?")[0], k, h["HX-Target"]) for p, k, h in follow] == [
        ("/section/decoding", "follow decoding", "decoding-samples")]
    r = client.get(follow[0][0], headers=follow[0][2])
    assert r.status_code == 200 and "Greedy, best beam and samples" in r.get_data(as_text=True)


def test_a_student_opens_the_class_page_then_types_a_prompt_at_the_top():
    """The first page is the one address the class opens (the model's own prompt); the next
    move types the student's own prompt in the box at the top of the page, naming the sections
    a browser has near it; the next request reads on from there."""
    with open(load_test.HELD_OUT, encoding="utf-8") as f:
        words = f.read().split()
    student = load_test.Student(0, None, 0, 1, None, None, words, "smollm2")
    path, kind, headers = student.choose(first=True)
    assert (path, kind, headers) == ("/?model=smollm2", "first page", {})
    path, kind, headers = student.choose()
    assert kind == "new prompt" and student.prompt and "prompt=" in path
    assert headers["X-Sections"] == ",".join(load_test.AT_THE_PROMPT_BOX) == \
        "tokenization,embeddings"
    assert student.section == "tokenization" and student.page == {}
