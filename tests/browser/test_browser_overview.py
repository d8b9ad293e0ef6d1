"""The overview in real Chromium: Next token appends the token the overview's sampler draws (the
page's default temperature, the overview's seed) and shows the next top five, Play steps until
Stop, the sampler's controls redraw the bars, a box opens its section and the slim map marks
it."""
import dataclasses
import re

import pytest
from playwright.sync_api import expect

from pipeline.generation import decode_loop, generation_steps
from pipeline.sampling import SamplerSettings, final_distribution, sampler
from web.presentation.numbers import probability as pct
from web.sections.sampling import PARAMS as SAMPLING_PARAMS

DEFAULT_PROMPT = ("It is a truth universally acknowledged, that a single man in possession of a "
                  "good fortune, must be in want of a")


# the page's one sampler (the Sampling section's parameters) at their defaults
_D = {p.name: p.default for p in SAMPLING_PARAMS}
DEFAULTS = SamplerSettings(repetition_penalty=_D["s_rep"], temperature=_D["s_temp"],
                           top_k=_D["s_topk"], top_p=_D["s_topp"], min_p=_D["s_minp"])
OV_SEED = _D["s_seed"]


def drawn(model, ids, n, settings=DEFAULTS):
    """The first n tokens the page's sampler draws after ids (its seed, the defaults)."""
    return [p.token for p in decode_loop(model, ids, n, sampler(settings, OV_SEED),
                                         stop_at_eos=False)]


def top_five_pairs(model, ids):
    return list(generation_steps(model, ids, 1, n_top=5, stop_at_eos=False))[0].top


def top_five_ids(model, ids):
    step = list(generation_steps(model, ids, 1, n_top=5, stop_at_eos=False))[0]
    return [str(i) for i, _ in step.top]


def test_next_token_appends_the_samplers_token(page, model, page_errors):
    page.goto_first_screen("/")
    overview = page.locator("#overview")
    chips = overview.get_by_role("list", name="Tokens of the pass").locator(".tid")
    bars = overview.get_by_role("list", name="Top 5 next tokens").locator("li")
    ids = model.tokenizer.encode_ordinary(DEFAULT_PROMPT)
    expect(bars).to_have_count(5)
    for i, expected in enumerate(top_five_ids(model, ids)):
        expect(bars.nth(i)).to_have_attribute("data-id", expected)
    page.get_by_role("button", name="Next token").click()
    first = drawn(model, ids, 1)[0]
    expect(overview.get_by_role("status").filter(has_text="generated")).to_have_text(
        "1 token generated.")
    expect(chips.last).to_have_text(str(first))
    expect(overview.locator(".chip.ov-new .tid").first).to_have_text(str(first))
    for i, expected in enumerate(top_five_ids(model, ids + [first])):
        expect(bars.nth(i)).to_have_attribute("data-id", expected)
    expect(overview.get_by_role("list", name="Chosen next token").locator(".tid")).to_have_text(
        str(drawn(model, ids, 2)[1]))
    expect(page).to_have_url(re.compile(r"[?&]ov_steps=1(&|$)"))
    # the keyboard presses it too, and a reload shows the same tokens
    page.get_by_role("button", name="Next token").press("Enter")
    expect(page).to_have_url(re.compile(r"[?&]ov_steps=2(&|$)"))
    page.reload_first_screen()                      # the overview: the first screen
    expect(chips.last).to_have_text(str(drawn(model, ids, 2)[1]))
    assert page_errors == []


def test_top_k_redraws_the_samplers_bars(page, model, page_errors):
    """At the page's default sampler, top-k 3 leaves three bars, renormalised, and the chosen
    token's probability is the sampler's for the new settings."""
    page.goto_first_screen("/")
    overview = page.locator("#overview")
    bars = overview.get_by_role("list", name="Top 5 next tokens").locator("li")
    expect(bars).to_have_count(5)
    ids = list(model.tokenizer.encode_ordinary(DEFAULT_PROMPT))
    logits = model.forward(ids)[-1]
    for k in (DEFAULTS.top_k, 3):
        settings = dataclasses.replace(DEFAULTS, top_k=k)
        if k != DEFAULTS.top_k:
            box = overview.get_by_label("Top-k")
            box.fill(str(k))
            box.press("Enter")
            expect(page).to_have_url(re.compile(r"[?&]s_topk=3(&|$)"))
        final = final_distribution(logits, ids, settings)
        zeros = sum(1 for t, _ in top_five_pairs(model, ids) if final[t] == 0)
        for i, (t, _) in enumerate(top_five_pairs(model, ids)):
            expect(bars.nth(i).locator(".ov-cprob")).to_have_text(
                re.compile(r"^\s*sampler p\s*" + re.escape(pct(float(final[t])))
                           + r"\s*$"))
        expect(overview.locator("li.ov-cand.ov-cut")).to_have_count(zeros)
        token = sampler(settings, OV_SEED)(logits, ids)
        expect(overview.get_by_role("list", name="Chosen next token").locator(".tid")) \
            .to_have_text(str(token))
        expect(overview.locator(".ov-chosen-p")).to_contain_text(
            f"sampler p {pct(float(final[token]))}")
    assert page_errors == []


def test_play_runs_until_stop(page, model, page_errors):
    page.goto_first_screen("/")
    live = page.locator("#overview-live")
    play = page.get_by_role("button", name="Play")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_disabled()
    play.click()
    expect(stop).to_be_enabled()
    expect(live).to_have_attribute("data-steps", re.compile(r"^[2-9]$|^1\d$"))
    stop.click()
    expect(stop).to_be_disabled()
    expect(play).to_be_enabled()
    page.wait_for_load_state("networkidle")
    steps = int(live.get_attribute("data-steps"))
    page.wait_for_load_state("networkidle")
    assert int(live.get_attribute("data-steps")) == steps     # nothing arrives after Stop
    assert steps < 20
    ids = model.tokenizer.encode_ordinary(DEFAULT_PROMPT)
    expect(page.get_by_role("list", name="Tokens of the pass").locator(".tid").last).to_have_text(
        str(drawn(model, ids, steps)[-1]))
    assert page_errors == []


def test_a_box_opens_its_section_and_the_map_marks_it(page, page_errors):
    page.goto_first_screen("/")
    kv = page.locator("#kvcache")
    expect(kv).to_have_attribute("data-lazy", "")               # a placeholder until reached
    page.locator("#overview .ov-kv").click(position={"x": 20, "y": 60})   # the box, not its link
    expect(page.locator("#kvcache h2")).to_be_in_viewport()
    expect(page.locator("#kvcache")).not_to_have_attribute("data-lazy", "")
    nav = page.get_by_role("navigation", name="Sections, in the order the data flows")
    expect(nav.get_by_role("link", name="KV cache")).to_have_attribute("aria-current",
                                                                        "location")
    # Enter on a box's link: the attention section
    page.evaluate("() => window.scrollTo(0, 0)")
    link = page.locator("#overview").get_by_role("link", name="Attention", exact=True)
    link.focus()
    link.press("Enter")
    expect(page.locator("#attention h2")).to_be_in_viewport()
    expect(page.locator("#attention")).not_to_have_attribute("data-lazy", "")
    # Landing among sections loads several at once; a busy server answers some with 503 and a
    # Retry-After, and the placeholder tries again (static/lazy.js): the browser logs the 503.
    assert [e for e in page_errors if "503" not in e] == []


def test_a_new_prompt_starts_the_overview_again(page, model, page_errors):
    page.goto_first_screen("/?ov_steps=3")
    chips = page.get_by_role("list", name="Tokens of the pass").locator(".tid")
    expect(page.locator("#overview-live")).to_have_attribute("data-steps", "3")
    page.get_by_label("Prompt", exact=True).fill("Emma Woodhouse, handsome")
    ids = model.tokenizer.encode_ordinary("Emma Woodhouse, handsome")
    expect(chips).to_have_count(len(ids))
    for i, t in enumerate(ids):
        expect(chips.nth(i)).to_have_text(str(t))
    expect(page.locator("#overview-live")).to_have_attribute("data-steps", "0")
    expect(page).not_to_have_url(re.compile(r"ov_steps="))
    assert page_errors == []


def test_reduced_motion_gets_the_new_state_without_motion(browser, base_url, model):
    for motion, moves in (("reduce", False), ("no-preference", True)):
        context = browser.new_context(base_url=base_url, reduced_motion=motion)
        page = context.new_page()
        page.goto("/")
        page.get_by_role("button", name="Next token").click()
        live = page.locator("#overview-live")
        expect(live).to_have_attribute("data-steps", "1")
        ids = model.tokenizer.encode_ordinary(DEFAULT_PROMPT)
        expect(page.get_by_role("list", name="Tokens of the pass").locator(".tid").last) \
            .to_have_text(str(drawn(model, ids, 1)[0]))
        if moves:
            expect(live).to_have_class(re.compile(r"\bov-stepped\b"))
        else:
            expect(live).not_to_have_class(re.compile(r"\bov-stepped\b"))
        context.close()


def below_the_map(page, locator) -> float:
    """How far the element's top is below the sticky map's bottom (negative: under the map)."""
    return locator.evaluate("""el => el.getBoundingClientRect().top -
        document.querySelector('.ov-map').getBoundingClientRect().bottom""")


def test_what_scrolls_into_view_stops_below_the_sticky_map(page):
    page.goto(f"/?prompt={DEFAULT_PROMPT}")
    nav = page.get_by_role("navigation", name="Sections, in the order the data flows")
    nav.get_by_role("link", name="Sampling").click()
    heading = page.locator("#sampling h2")
    expect(heading).to_be_in_viewport()
    assert below_the_map(page, heading) >= 0
    # a control reached by the keyboard while the page is scrolled past it
    page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
    slider = page.locator("#sampling").get_by_label(re.compile("Temperature")).first
    slider.focus()
    expect(slider).to_be_in_viewport()
    assert below_the_map(page, slider) >= 0


def test_the_text_grows_and_the_chosen_token_is_the_next_to_append(page, model, page_errors):
    """Two presses of Next token: the Text box shows the prompt and the 2 tokens generated so far
    (decoded with the model's tokenizer from the chips' ids, the new text marked), and the chosen
    token is labelled as the one the next step (step 3) appends."""
    page.goto_first_screen("/")
    overview = page.locator("#overview")
    next_token = page.get_by_role("button", name="Next token")
    status = overview.get_by_role("status").filter(has_text="generated")
    next_token.click()
    expect(status).to_have_text("1 token generated.")
    next_token.click()
    expect(status).to_have_text("2 tokens generated.")
    new = overview.get_by_role("list", name="Tokens of the pass").locator(".chip.ov-new .tid")
    expect(new).to_have_count(2)
    generated = [int(t) for t in new.all_inner_texts()]
    prompt = list(model.tokenizer.encode_ordinary(DEFAULT_PROMPT))
    assert generated == drawn(model, prompt, 2)
    whole = model.tokenizer.decode(prompt + generated)
    text_box = overview.get_by_role("listitem").filter(
        has=page.get_by_role("link", name="Text", exact=True))
    expect(text_box.locator("p[dir=auto]")).to_have_text(whole)
    expect(text_box.locator("mark")).to_have_text(whole[len(model.tokenizer.decode(prompt)):])
    expect(text_box).to_contain_text("after step 2: the prompt")
    assert page_errors == []


def test_the_whole_pass_is_the_first_screen(browser, base_url):
    """At 1280x800 the overview's boxes, from the Text box (where the prompt is typed) to the
    chosen token, are all on the first screen, without scrolling."""
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto("/")
        overview = page.locator("#overview")
        expect(overview.get_by_label("Prompt", exact=True)).to_have_value(DEFAULT_PROMPT)
        expect(overview.locator("#ov-attn-plot .main-svg").first).to_be_attached()
        for name in ("Text", "Tokens", "Embedding rows", "Positions", "Attention", "KV cache",
                     "Logits", "Top 5 next tokens", "Sampler", "Chosen"):
            box = overview.locator(".ov-box, .ov-part").filter(
                has=page.get_by_role("link", name=name, exact=True)).first
            expect(box).to_be_in_viewport(ratio=1)
        assert page.evaluate("() => window.scrollY") == 0
    finally:
        context.close()


def test_typing_in_the_text_box_survives_the_overview_being_redrawn(page, model):
    """The Text box is the prompt's field: typing runs the page (chips and overview follow), and
    the textarea is kept as it is while the overview around it is replaced (htmx hx-preserve):
    the focus and what was typed after the request stay."""
    page.goto_first_screen("/")
    box = page.get_by_label("Prompt", exact=True)
    box.fill("")
    box.press_sequentially("Emma was")
    chips = page.get_by_role("list", name="Tokens of the pass").locator(".tid")
    ids = model.tokenizer.encode_ordinary("Emma was")
    expect(chips).to_have_count(len(ids))
    box.press_sequentially(" happy")
    assert page.evaluate("() => document.activeElement.id") == "prompt-input"
    whole = model.tokenizer.encode_ordinary("Emma was happy")
    expect(chips).to_have_count(len(whole))
    expect(chips.last).to_have_text(str(whole[-1]))
    expect(box).to_have_value("Emma was happy")
    assert page.evaluate("() => document.activeElement.id") == "prompt-input"
    # a step of the loop redraws the live part around the box: the box stays the same element
    page.evaluate("() => { document.getElementById('prompt-input').dataset.mark = 'kept'; }")
    page.get_by_role("button", name="Next token").click()
    expect(page.locator("#overview-live")).to_have_attribute("data-steps", "1")
    expect(box).to_have_attribute("data-mark", "kept")
    expect(box).to_have_value("Emma was happy")


def test_the_overviews_top_token_waits_for_the_prediction(page, model):
    """Before a step, the top five's and the chosen token's names are blurred (the Logits
    section asks the class to predict the top token); the overview's own button shows them
    and the Logits prediction then says it was shown without a guess."""
    page.goto_first_screen("/")
    overview = page.locator("#overview")
    names = overview.get_by_role("list", name="Top 5 next tokens").locator(".ov-ctok")
    chosen = overview.get_by_role("list", name="Chosen next token").locator(".tok")
    blur = "el => getComputedStyle(el).filter"
    assert "blur" in names.first.evaluate(blur) and "blur" in chosen.evaluate(blur)
    ids = model.tokenizer.encode_ordinary(DEFAULT_PROMPT)
    expect(overview.get_by_role("list", name="Top 5 next tokens").locator("li").first) \
        .to_have_attribute("data-id", top_five_ids(model, ids)[0])  # bars and ids: there
    overview.get_by_role("button", name="show the top 5 now").click()
    assert names.first.evaluate(blur) == "none" and chosen.evaluate(blur) == "none"
    expect(overview.get_by_role("button", name="show the top 5 now")).to_be_hidden()
    page.load_sections("logits")
    verdict = page.locator("#logits .predict-verdict")
    expect(verdict).to_have_text("Shown without a guess.")
    page.reload_first_screen()                      # shown in this browser: stays shown
    expect(names).to_have_count(5)
    assert names.first.evaluate(blur) == "none"


def test_next_token_shows_the_hidden_top_token(page):
    page.goto_first_screen("/")
    overview = page.locator("#overview")
    page.get_by_role("button", name="Next token").click()
    expect(page.locator("#overview-live")).to_have_attribute("data-steps", "1")
    expect(overview.locator(".ov-gate")).to_have_count(0)     # a step: nothing left to hide
    page.get_by_role("button", name="Back to the prompt").click()
    expect(page.locator("#overview-live")).to_have_attribute("data-steps", "0")
    names = overview.get_by_role("list", name="Top 5 next tokens").locator(".ov-ctok")
    expect(names).to_have_count(5)
    assert names.first.evaluate("el => getComputedStyle(el).filter") == "none"
    page.load_sections("logits")
    expect(page.locator("#logits .predict-verdict")).to_have_text("Shown without a guess.")


@pytest.mark.sections("sampling")
def test_one_sampler_moved_in_either_place_moves_the_other(page, model, page_errors):
    """The overview's Top-k and the Sampling section's are one parameter: set in the overview,
    the Sampling section's box shows it and its distribution follows (the tokens that can be
    drawn); set in Sampling, the overview's box and its bars follow. One s_topk in the URL."""
    page.goto("/")
    ids = list(model.tokenizer.encode_ordinary(DEFAULT_PROMPT))
    logits = model.forward(ids)[-1]
    overview, sampling = page.locator("#overview"), page.locator("#sampling")
    survivors = sampling.locator("#survivors")
    here = overview.get_by_label("Top-k")
    there = sampling.get_by_label("Top-k")
    for box, other, k in ((here, there, 3), (there, here, 5)):
        box.fill(str(k))
        box.press("Enter")
        expect(other).to_have_value(str(k))
        expect(page).to_have_url(re.compile(r"[?&]s_topk=%d(&|#|$)" % k))
        assert page.url.count("s_topk=") == 1
        final = final_distribution(logits, ids, dataclasses.replace(DEFAULTS, top_k=k))
        # the place out of sight follows once it nears the screen (static/requests.js)
        other.scroll_into_view_if_needed()
        expect(survivors).to_contain_text(
            f"{int((final > 0).sum()):,} of {model.config.vocab_size:,} tokens can be drawn")
        expect(overview.locator("li.ov-cand:not(.ov-cut)")).to_have_count(
            sum(1 for t, _ in top_five_pairs(model, ids) if final[t] > 0))
        token = sampler(dataclasses.replace(DEFAULTS, top_k=k), OV_SEED)(logits, ids)
        expect(overview.get_by_role("list", name="Chosen next token").locator(".tid")) \
            .to_have_text(str(token))
    assert page_errors == []
