"""A long prompt in real Chromium: the lists and tables that grow with it (the token chips of
tokenization, attention and the generation loop, tiling's online-softmax steps) scroll in a box
of their own instead of stretching their section, hold every token, and show the token in
question (the one clicked, the one just chosen) inside the box."""
import os
import re

import pytest
from playwright.sync_api import expect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "data", "heldout_pride_and_prejudice_ch10.txt"),
          encoding="utf-8") as f:
    PROMPT = f.read()[:700]
MAX_BOX_PX = 260            # .grows in style.css: 14rem at the page's 18 px is 252 px

BOX = """(sel) => { const box = document.querySelector(sel);
  return {height: box.getBoundingClientRect().height, scrolls: box.scrollHeight > box.clientHeight,
          cap: parseFloat(getComputedStyle(box).maxHeight),
          focusable: box.tabIndex >= 0 || !!box.querySelector('button')}; }"""
INSIDE = """([boxSel, itemSel]) => { const box = document.querySelector(boxSel);
  const item = box.querySelector(itemSel);
  const b = box.getBoundingClientRect(), r = item.getBoundingClientRect();
  return r.top >= b.top - 1 && r.bottom <= b.bottom + 1; }"""


@pytest.mark.sections("tokenization", "attention", "generation", "tiling")
def test_long_lists_scroll_in_their_own_box_and_show_the_token_in_question(page, model):
    n = len(model.tokenizer.encode_ordinary(PROMPT))
    assert n > 150
    page.goto("/?prompt=" + PROMPT.replace("\n", "%0A").replace("&", "%26"))
    boxes = {
        "tokenization": page.get_by_role("list", name="Tokens of the prompt"),
        "attention": page.get_by_role("list", name="Attention from the clicked token"),
        "generation": page.get_by_role("list", name="Sequence at this step"),
        "tiling": page.get_by_role("group", name="Online softmax steps, one row per key tile"),
    }
    for box in boxes.values():
        expect(box).to_be_attached()
    expect(boxes["tokenization"].locator("li")).to_have_count(n)          # every token is there
    expect(boxes["generation"].locator("li")).to_have_count(n + 1)        # and the one chosen
    for name in boxes:
        sel = {"tokenization": "#tokenization .grows", "attention": "#attention .grows",
               "generation": "#generation .grows", "tiling": "#tiling .grows"}[name]
        got = page.evaluate(BOX, sel)
        assert got["scrolls"] and got["height"] <= got["cap"] + 1 <= MAX_BOX_PX, (name, got)
        assert got["focusable"], name              # a keyboard can scroll it
    # the clicked token (the last, by default) and the token the loop chose are in view
    assert page.evaluate(INSIDE, ["#attention .grows", '[aria-pressed="true"]'])
    assert page.evaluate(INSIDE, ["#generation .grows", ".chip.new"])
    # clicking an early token keeps it in view after its answer replaces the row
    boxes["attention"].get_by_role("button").nth(3).click()
    expect(page).to_have_url(re.compile(r"att_token=3"))
    expect(boxes["attention"].get_by_role("button").nth(3)).to_have_attribute("aria-pressed",
                                                                               "true")
    assert page.evaluate(INSIDE, ["#attention .grows", '[aria-pressed="true"]'])
