"""The learning experience in Chromium: the tour, presentation mode, predict-then-reveal, CSV
export, theme, and a phone-width page."""
import base64
import csv
import io
import json
import re

import numpy as np
import pytest
from playwright.sync_api import expect

from web.core.registry import SECTIONS
from web.figures import DARK_INKS as FIGURE_DARK_INKS
from web.figures import INK, ROLES
from web.presentation.tour import tour_steps

STEPS = tour_steps(SECTIONS)


def test_the_tour_visits_every_step_in_order_and_back(page, page_errors):
    page.goto("/")
    page.get_by_role("button", name="Guided tour").click()
    tour = page.get_by_role("complementary", name=re.compile("Guided tour"))
    next_button = tour.get_by_role("button", name="Next step")
    for step in STEPS:
        expect(tour.locator("#tour-progress")).to_have_text(
            f"Guided tour: step {step.number} of {len(STEPS)}")
        expect(tour.get_by_role("heading", name=f"{step.number}. {step.title}")).to_be_visible()
        expect(page).to_have_url(re.compile(rf"tour={step.number}(&|$)"))
        if step.target != "prompt":
            expect(page.locator(f"section#{step.target}")).to_have_class(re.compile(r"\bcurrent\b"))
        if step.number < len(STEPS):
            next_button.click()
    expect(next_button).to_be_disabled()
    page.locator("body").click(position={"x": 2, "y": 2})     # focus off the buttons
    for step in reversed(STEPS[:-1]):
        page.keyboard.press("ArrowLeft")
        expect(tour.locator("#tour-progress")).to_have_text(
            f"Guided tour: step {step.number} of {len(STEPS)}")
    expect(tour.get_by_role("button", name="Previous step")).to_be_disabled()
    page.keyboard.press("Escape")
    expect(tour).to_be_hidden()
    expect(page).not_to_have_url(re.compile(r"tour="))
    assert page_errors == []


def test_presentation_mode_shows_one_step_and_survives_reload(page):
    page.goto_first_screen("/")          # a slide loads its own section
    page.locator("body").press("p")
    expect(page.locator("body")).to_have_class(re.compile(r"\bpresent\b"))
    expect(page).to_have_url(re.compile(r"present=1"))
    page.get_by_role("button", name="Next step").click()
    page.get_by_role("button", name="Next step").click()          # step 3
    target = STEPS[2].target
    visible = page.locator("main .section:visible")
    expect(visible).to_have_count(1)
    expect(visible).to_have_id(target)
    page.goto_first_screen(page.url)     # reload: only the slide's section is there to load
    expect(page.locator("body")).to_have_class(re.compile(r"\bpresent\b"))
    expect(page.locator("main .section:visible")).to_have_id(target)
    # the page's header, with the toggle, folds away while presenting (P or Close leave)
    expect(page.locator("#present-toggle")).to_have_attribute("aria-pressed", "true")
    page.locator("body").press("p")
    expect(page.locator("body")).not_to_have_class(re.compile(r"\bpresent\b"))
    expect(page).not_to_have_url(re.compile(r"present="))


def blurred(locator) -> bool:
    """Whether the element is drawn blurred: a CSS blur on it or on a box around it."""
    return locator.evaluate("""el => { for (let e = el; e; e = e.parentElement)
        if (getComputedStyle(e).filter.includes('blur')) return true; return false; }""")


@pytest.mark.sections("logits")
def test_a_prediction_is_recorded_before_the_reveal(page, model):
    prompt = "It is a truth universally acknowledged, that a single man"
    logits = model.forward(model.tokenizer.encode(prompt))[-1]
    top = model.tokenizer.decode_single_token_bytes(int(np.argmax(logits))).decode().strip()
    page.goto("/?prompt=" + prompt)
    box = page.locator("#logits .predict")
    reveal = box.locator(".predict-reveal")
    expect(reveal).to_be_hidden()
    expect(page.locator("#lg-probs")).to_have_class(re.compile(r"\bgated\b"))
    assert blurred(page.locator("#lg-probs")) and not blurred(page.locator("#lg-entropy"))
    box.get_by_label("Your guess").fill("of")
    box.get_by_role("button", name="Lock in my guess").click()
    expect(reveal).to_be_visible()
    expect(box.locator(".predict-guess")).to_have_text("of")
    expect(box.locator(".predict-answer")).to_have_text(re.compile(re.escape(top)))
    expect(box.locator(".predict-verdict")).to_have_text("Right!" if top == "of"
                                                          else "Not this time.")
    expect(page.locator("#lg-probs")).not_to_have_class(re.compile(r"\bgated\b"))
    stored = page.evaluate("() => Object.entries(localStorage)"
                           ".filter(([k]) => k.startsWith('predict:next-token:'))")
    assert stored == [[f"predict:next-token:{top}", "of"]]
    page.reload()                                   # the guess stays, and so does the reveal
    expect(reveal).to_be_visible()
    expect(box.locator(".predict-guess")).to_have_text("of")


@pytest.mark.sections("kvcache", "sampling", "decoding")
def test_number_and_choice_predictions_compare_with_the_models_answer(page, model):
    """The KV cache's bytes per token (a number), top-p 0.5's survivors (a number) and beam vs
    greedy (a choice): each guess is recorded, then compared with the value the pipeline
    computes."""
    from pipeline.decoding import beam_search, sequence_logprobs
    from pipeline.kvcache import kv_bytes_per_token
    from pipeline.sampling import softmax_with_temperature, top_p_keep
    from web.sections.decoding import beam_vs_greedy

    prompt = "Emma Woodhouse, handsome, clever, and rich"
    ids = model.tokenizer.encode(prompt)
    page.goto("/?prompt=" + prompt + "&open=sp-stages")    # top-p's question is in that disclosure

    kv = page.locator("#kvcache .predict")
    nbytes = kv_bytes_per_token(model.config, 4)         # what one token adds, float32
    expect(page.locator("#kv-per-token")).to_have_class(re.compile(r"\bgated\b"))
    kv.get_by_label("Your guess").fill(str(nbytes // 2))
    kv.get_by_role("button", name="Lock in my guess").click()
    expect(kv.locator(".predict-answer")).to_have_text(f"{nbytes:,} bytes per token")
    expect(kv.locator(".predict-verdict")).to_have_text("You were off by a factor of 2.00.")
    expect(page.locator("#kv-per-token")).not_to_have_class(re.compile(r"\bgated\b"))

    half = int(top_p_keep(softmax_with_temperature(model.forward(ids)[-1], 1.0), 0.5).sum())
    tp = page.locator("#sampling .predict")
    tp.get_by_label("Your guess").fill(str(half))
    tp.get_by_role("button", name="Lock in my guess").click()
    expect(tp.locator(".predict-answer")).to_contain_text(f"{half:,} kept")
    expect(tp.locator(".predict-verdict")).to_have_text("Exactly right.")

    beam = page.locator("#decoding .predict")
    expect(page.locator("#beam-vs-greedy")).to_have_class(re.compile(r"\bgated\b"))
    beam.get_by_role("radio", name="the same").check()
    beam.get_by_role("button", name="Lock in my guess").click()
    expect(beam.locator(".predict-guess")).to_have_text("the same")
    greedy = []                                     # greedy by hand: argmax, 6 tokens or EOS
    while len(greedy) < 6 and (not greedy or greedy[-1] != model.config.eos_token_id):
        greedy.append(int(np.argmax(model.forward(ids + greedy)[-1])))
    greedy_total = sum(sequence_logprobs(model, ids, greedy))
    best = beam_search(model, ids, 3, 6, 1.0).final[0]
    verdict = beam_vs_greedy(len(best.tokens) == len(greedy), best.total - greedy_total)
    expect(beam.locator(".predict-answer")).to_contain_text(verdict + " (")
    expect(beam.locator(".predict-verdict")).to_have_text(
        "Right!" if verdict == "the same" else "Not this time.")
    stored = dict(page.evaluate("() => Object.entries(localStorage)"))
    assert stored[f"predict:kv-bytes:{nbytes}"] == str(nbytes // 2)
    assert stored[f"predict:top-p-half:{half}"] == str(half)
    assert stored[f"predict:beam-vs-greedy:{verdict}"] == "the same"


def decode(v):
    """plotly.py's typed arrays ({dtype, bdata, shape}) as lists, as the page decodes them."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        if "shape" in v:
            a = a.reshape([int(n) for n in str(v["shape"]).split(",")])
        return a.tolist()
    return v


def expected_rows(fig):
    rows = []
    for n, t in enumerate(fig["data"]):
        x, y, z, text = (decode(t.get(k)) for k in ("x", "y", "z", "text"))
        name = t.get("name") or t.get("type", "")
        if isinstance(z, list) and z and isinstance(z[0], list):
            for i, row in enumerate(z):
                for j, value in enumerate(row):
                    rows.append([n, name, x[j] if x else j, y[i] if y else i, value, ""])
            continue
        for k in range(max(len(x or []), len(y or []), len(z) if isinstance(z, list) else 0)):
            rows.append([n, name, x[k] if x else "", y[k] if y else "",
                         z[k] if isinstance(z, list) else "",
                         text[k] if isinstance(text, list) else (text or "")])
    return rows


def same(a: str, b) -> bool:
    if b is None or b == "":
        return a == ""
    if isinstance(b, float) and b != b:              # a masked cell (NaN): written as NaN
        return a == "NaN"
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        return float(a) == float(b)
    return a == str(b)


@pytest.mark.sections("tokenization")
def test_an_exported_csv_matches_the_figures_data(page):
    page.goto("/?open=tok-learn")               # the chart is under "learn BPE yourself"
    for label in ("Line chart: tokens in the text after each number of merges",):
        plot = page.get_by_role("img", name=label)
        fig = json.loads(plot.get_attribute("data-figure"))
        with page.expect_download() as info:
            page.get_by_role("button", name=f"Download the data as CSV: {label}").click()
        text = open(info.value.path(), encoding="utf-8").read()
        got = list(csv.reader(io.StringIO(text)))
        assert got[0] == ["trace", "name", "x", "y", "z", "text"]
        want = expected_rows(fig)
        assert len(got) - 1 == len(want) > 0
        for g, w in zip(got[1:], want, strict=True):
            assert all(same(a, b) for a, b in zip(g, w, strict=False)), (g, w)


@pytest.mark.sections("tiling")
def test_a_heatmap_exports_one_row_per_cell(page):
    page.goto("/")
    plot = page.locator("#tiling .plot[data-figure]").first
    fig = json.loads(plot.get_attribute("data-figure"))
    label = plot.get_attribute("aria-label")
    with page.expect_download() as info:
        page.get_by_role("button", name=f"Download the data as CSV: {label}").click()
    got = list(csv.reader(io.StringIO(open(info.value.path(), encoding="utf-8").read())))[1:]
    want = expected_rows(fig)
    z = decode(fig["data"][0]["z"])
    assert len(got) == len(want) == len(z) * len(z[0])
    assert all(all(same(a, b) for a, b in zip(g, w, strict=False))
               for g, w in zip(got, want, strict=True))


def test_dark_theme_is_kept_in_the_url(page):
    page.goto_first_screen("/")                     # the page's own colours: no section read
    page.get_by_label("Theme").select_option("dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    expect(page).to_have_url(re.compile(r"theme=dark"))
    page.reload_first_screen()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(13, 17, 23)"


def test_no_horizontal_scrolling_at_390_px(page):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/")
    expect(page.locator("main .plot .main-svg").last).to_be_attached()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide"


FIGURE_COLOURS = """() => Array.from(document.querySelectorAll('.plot[data-figure]'))
  .filter(el => el._fullLayout).map(el => {
    const colours = [];
    for (const t of el._fullData) {
      for (const c of [t.line && t.line.color, t.marker && t.marker.color]) {
        if (typeof c === 'string') colours.push(c.toLowerCase());
      }
    }
    const boxes = (el._fullLayout.annotations || []).map(a => a.bgcolor)
      .concat([el._fullLayout.showlegend ? el._fullLayout.legend.bgcolor : 'none']);
    return {colours, boxes, paper: el._fullLayout.paper_bgcolor};
  })"""
# the server's dark inks, which static/figure-style.js draws light in the dark theme: the page
# names them
DARK_INKS = {c.lower() for c in FIGURE_DARK_INKS}


def test_dark_theme_draws_figures_in_light_ink(page):
    """The figures are built for a white page: in the dark theme the server's dark inks would
    vanish on the dark paper and white label boxes (legends, the beam tree's nodes) would hold
    light text. Drawn, no trace is in a dark ink and no box is white; the light theme keeps both."""
    page.goto("/")
    expect(page.locator("html")).to_have_attribute("data-dark-inks", " ".join(FIGURE_DARK_INKS))
    assert DARK_INKS == {INK.lower(), ROLES["MODEL_P"].lower()}
    light = page.evaluate(FIGURE_COLOURS)
    assert any(DARK_INKS & set(f["colours"]) for f in light)
    assert any(b.startswith("rgba(255, 255, 255") or b in ("white", "#fff", "#ffffff")
               for f in light for b in f["boxes"])
    page.get_by_label("Theme").select_option("dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    dark = page.evaluate(FIGURE_COLOURS)
    assert len(dark) == len(light) and all(f["paper"] == "#161b26" for f in dark)
    assert not any(DARK_INKS & set(f["colours"]) for f in dark)
    assert not any(b.startswith("rgba(255, 255, 255") or b in ("white", "#fff", "#ffffff")
                   for f in dark for b in f["boxes"])


@pytest.mark.sections("logits", "kvcache")
def test_a_gate_blurs_the_answer_not_the_opened_disclosure(page, model):
    """With "Go deeper" open before the guess, the table and its notes stay readable: only the
    top token's cell and id (and the bar chart) are blurred, and they clear on the guess."""
    prompt = "Emma Woodhouse, handsome, clever, and rich"
    page.goto("/?prompt=" + prompt + "&open=lg-table,kv-how")
    table = page.get_by_role("table", name="Highest-scoring next tokens")
    expect(table).to_be_visible()
    assert not blurred(table) and not blurred(table.locator("tbody tr").nth(1))
    assert blurred(page.locator("#lg-top-token")) and blurred(page.locator("#lg-top-id"))
    top = int(np.argmax(model.forward(model.tokenizer.encode(prompt))[-1]))
    expect(page.locator("#lg-top-id")).to_have_text(str(top))
    kv_disclosure = page.locator("#deeper-kv-how")
    expect(kv_disclosure.get_by_role("table", name="Checked steps")).to_be_visible()
    # the steps' table names the next token and the cache's bytes: blurred, both answers in it
    assert blurred(kv_disclosure.get_by_role("table", name="Checked steps"))
    assert not blurred(page.locator("#kv-steps-h"))
    assert blurred(page.locator("#kv-per-token"))
    page.locator("#logits .predict").get_by_role("button", name="Just show me").click()
    expect(page.locator("#lg-top-token")).not_to_have_class(re.compile(r"\bgated\b"))
    assert not blurred(page.locator("#lg-top-token"))


@pytest.mark.sections("logits", "kvcache", "decoding")
def test_just_show_me_says_the_answer_was_shown_without_a_guess(page, model):
    """"Just show me": the verdict says no guess was made (not "Not this time"), for a word, a
    number and a choice; the overview's top token, hidden until then, is shown too."""
    prompt = "She was the youngest of the two daughters"
    top = model.tokenizer.decode([int(np.argmax(model.forward(
        model.tokenizer.encode(prompt))[-1]))]).strip()
    page.goto("/?prompt=" + prompt)
    overview_top = page.locator("#overview").get_by_role("list", name="Top 5 next tokens")
    assert blurred(overview_top.locator(".ov-ctok").first)
    for sid in ("logits", "kvcache", "decoding"):
        box = page.locator(f"#{sid} .predict")
        box.get_by_role("button", name="Just show me").click()
        expect(box.locator(".predict-verdict")).to_have_text("Shown without a guess.")
        expect(box.locator(".predict-reveal")).not_to_contain_text("Not this time")
        expect(box.get_by_text("You guessed")).to_be_hidden()
        expect(box.get_by_role("button", name="Just show me")).to_be_hidden()
    expect(page.locator("#logits .predict-answer")).to_contain_text(top)
    assert not blurred(overview_top.locator(".ov-ctok").first)
    stored = page.evaluate("() => localStorage.getItem('predict:next-token:' + "
                           "document.querySelector('#logits .predict').dataset.answer)")
    assert stored == ""                                  # shown, no guess: kept as such
    page.reload()
    expect(page.locator("#logits .predict-verdict")).to_have_text("Shown without a guess.")
    assert not blurred(page.locator("#overview").get_by_role(
        "list", name="Top 5 next tokens").locator(".ov-ctok").first)
