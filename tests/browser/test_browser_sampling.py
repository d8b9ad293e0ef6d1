"""The sampling and greedy-vs-beam sections in real Chromium: sliders change the distribution
to the pipeline's values, the seeded draw, the beam tree's nodes, state in the URL."""
import re

import numpy as np
import pytest
from playwright.sync_api import expect

from pipeline.decoding import beam_search
from pipeline.generation import decode_loop
from pipeline.sampling import SamplerSettings, sample_next, sampling_stages
from web.presentation.numbers import percent
from web.sections.sampling import shown_tokens

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("sampling", "decoding")


def pct(p):  # as the Sampling section's table writes a probability
    return percent(p, 2, floor=0.0001)

PROMPT = "Elizabeth was very much surprised; she had not expected to see"


def sampling(page):
    return page.get_by_role("region", name=re.compile(r"^\d+ Sampling"))


def decoding(page):
    return page.get_by_role("region", name=re.compile(r"^\d+ Greedy vs beam search"))


def stages_for(model, settings):
    ids = model.tokenizer.encode_ordinary(PROMPT)
    return ids, sampling_stages(model.forward(ids)[-1], ids, settings)


def final_column(page):
    """The last cell (after min-p, the distribution drawn from) of each token row (the table
    is in a closed disclosure: found by its label, not its role)."""
    rows = sampling(page).locator('table[aria-label="Distribution after each stage"] tbody tr')
    return rows.locator("td:last-child")


def test_sliders_change_the_distribution_to_the_pipelines(page, model, page_errors):
    page.goto("/?prompt=" + PROMPT + "#sampling")
    sampling(page).get_by_role("slider", name="Temperature").fill("0.5")
    expect(page).to_have_url(re.compile(r"s_temp=0.5"))
    sampling(page).get_by_role("slider", name="Top-p").fill("0.85")
    expect(page).to_have_url(re.compile(r"s_topp=0.85"))
    # top-k and min-p at the section's defaults
    ids, stages = stages_for(model, SamplerSettings(temperature=0.5, top_k=40, top_p=0.85,
                                                    min_p=0.05))
    shown = shown_tokens(stages)
    expected = [pct(stages[-1].probs[t]) if stages[-1].kept[t] else "removed" for t in shown]
    expect(final_column(page)).to_have_text(expected + [pct(float(max(0.0, 1 - sum(
        stages[-1].probs[shown].astype(np.float64))))), re.compile(r"[\d,]+"),
        re.compile(r"[\d.]+")])
    n = int((stages[-1].probs > 0).sum())
    expect(page.locator("#survivors")).to_have_text(f"{n:,} of 4,096 tokens can be drawn.")
    expect(page.locator("#sampling .plot .main-svg").first).to_be_attached()
    assert page_errors == []


def test_top_k_and_the_seeded_draw(page, model):
    page.goto("/?prompt=" + PROMPT + "&s_temp=1.5#sampling")
    sampling(page).get_by_label("Top-k").fill("3")
    sampling(page).get_by_label("Top-k").press("Tab")     # a number box asks on change
    expect(page.locator("#survivors")).to_have_text("3 of 4,096 tokens can be drawn.")
    ids, _ = stages_for(model, SamplerSettings())
    logits = model.forward(ids)[-1]
    settings = SamplerSettings(temperature=1.5, top_k=3)
    for seed in (0, 1, 2):
        token = sample_next(logits, ids, settings, np.random.default_rng(seed))
        expect(page.locator("#one-draw")).to_contain_text(f"Seed {seed}: u =")
        expect(page.locator("#one-draw")).to_contain_text(f"(token {token}, probability")
        sampling(page).get_by_role("button", name="Draw again with the next seed").click()
    expect(page).to_have_url(re.compile(r"s_seed=3"))


def test_a_bad_value_shows_its_message_next_to_the_control(page):
    page.goto("/?s_topp=0#sampling")
    expect(page.locator("#error-s_topp")).to_have_text(re.compile("Top-p must be greater than 0"))
    top_p = sampling(page).get_by_role("slider", name="Top-p")
    expect(top_p).to_have_attribute("aria-invalid", "true")
    sampling(page).get_by_role("slider", name="Top-p").fill("0.5")
    expect(page.locator("#error-s_topp")).to_have_text("")
    expect(page).to_have_url(re.compile(r"s_topp=0.5"))


def test_beam_tree_shows_the_kept_nodes(page, model, page_errors):
    page.goto("/?prompt=" + PROMPT + "&open=dec-beams#decoding")    # final beams shown
    decoding(page).get_by_role("slider", name="Beam width").fill("2")
    expect(page).to_have_url(re.compile(r"b_width=2"))
    decoding(page).get_by_role("slider", name="New tokens").fill("4")
    expect(page).to_have_url(re.compile(r"b_width=2&b_new=4"))
    ids = model.tokenizer.encode_ordinary(PROMPT)
    search = beam_search(model, ids, 2, 4)
    kept = [n for n in search.nodes if n.status != "pruned"]
    decoding(page).get_by_text("The tree as a table").click()
    rows = page.get_by_role("table", name="Kept proposals of the beam search").locator("tbody tr")
    expect(rows).to_have_count(len(kept))
    expect(rows.locator("td:nth-child(5)")).to_have_text([f"{n.total:.3f}" for n in kept])
    finals = page.get_by_role("table", name="Final beams").locator("tbody tr")
    expect(finals.locator("td:nth-child(4)")).to_have_text([f"{h.total:.3f}"
                                                            for h in search.final])
    expect(page.locator("#decoding .plot .main-svg").first).to_be_attached()
    assert page_errors == []


def test_state_round_trips_through_the_url(page):
    q = "s_rep=1.3&s_temp=0.75&s_topk=30&s_topp=0.95&s_minp=0.02&s_seed=9&s_draws=500" \
        "&b_width=4&b_new=5&b_alpha=0.5"
    page.goto("/?prompt=" + PROMPT + "&" + q)        # a shared link: every control from the URL
    for name, value in (("Repetition penalty", "1.3"), ("Temperature", "0.75"),
                        ("Top-p", "0.95"), ("Min-p", "0.02")):
        expect(sampling(page).get_by_role("slider", name=name)).to_have_value(value)
    for name, value in (("Beam width", "4"), ("New tokens", "5"), ("Length penalty", "0.5")):
        expect(decoding(page).get_by_role("slider", name=name)).to_have_value(value)
    expect(sampling(page).get_by_label("Top-k")).to_have_value("30")
    expect(sampling(page).get_by_label("Seed", exact=True)).to_have_value("9")
    expect(sampling(page).get_by_label("Number of draws")).to_have_value("500")
    expect(page.locator("#one-draw")).to_contain_text("Seed 9:")
    sampling(page).get_by_role("slider", name="Min-p").fill("0.1")
    expect(page).to_have_url(re.compile(r"s_minp=0.1"))
    for part in q.split("&"):
        if not part.startswith("s_minp"):
            expect(page).to_have_url(re.compile(re.escape(part)))


def test_sampling_controls_refresh_the_samples_beside_the_beams(page, model):
    page.goto("/?prompt=" + PROMPT + "&open=dec-beams#sampling")     # the samples shown
    sampling(page).get_by_role("slider", name="Temperature").fill("0.3")
    expect(page).to_have_url(re.compile(r"s_temp=0.3"))
    # the note names the settings, each name a glossary button (its definition in the page)
    note = decoding(page).locator("p.note").filter(has_text="The samples are drawn with")
    note.scroll_into_view_if_needed()        # out of sight, they follow once they near the screen
    expect(note.locator(".term-btn").first).to_have_text("temperature")
    expect(note).to_contain_text(re.compile(r"temperature\b.*\s0\.3,.*top-k\b.*\s40,"))
    ids = model.tokenizer.encode_ordinary(PROMPT)
    from pipeline.sampling import sampler
    settings = SamplerSettings(temperature=0.3, top_k=40, top_p=0.9, min_p=0.05)
    tokens = [p.token for p in decode_loop(model, ids, 6, sample=sampler(settings, 0))]
    row = decoding(page).get_by_role("table", name="Greedy, best beam and samples") \
        .get_by_role("row", name=re.compile("sample, seed 0"))
    expect(row).to_contain_text(model.tokenizer.decode(tokens).strip())


def samples_below(page, opened: str):
    """The page at 1280x720 with the disclosures `opened` open, scrolled to the Temperature
    slider: decoding's samples table, the slider and the samples' place, far below."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto("/?prompt=" + PROMPT + "&open=" + opened + "#sampling")
    table = decoding(page).get_by_role("table", name="Greedy, best beam and samples")
    expect(table).to_be_attached()
    slider = sampling(page).get_by_role("slider", name="Temperature")
    slider.scroll_into_view_if_needed()
    return table, slider, page.locator("#decoding-samples")


def test_samples_out_of_sight_follow_when_they_near_the_screen(page, model):
    """A sampling control moved while decoding's samples are far below the screen does not wait
    for them: its answer computes none (no request for them either), the samples are marked out
    of date, and scrolled to, they ask for themselves and show the draws of the new settings."""
    table, slider, samples = samples_below(page, "dec-beams,sp-many,sp-stages")
    below = samples.evaluate("el => el.getBoundingClientRect().top - window.innerHeight")
    assert below > 300, f"the samples are only {below} px below the screen: not out of sight"
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/section/decoding" in r.url else None)
    with page.expect_response(lambda r: "/section/sampling" in r.url) as answer:
        slider.fill("0.3")
    # the overview's live part, at the top of the page, is out of sight too
    assert set(answer.value.headers.get("x-stale").split(",")) == {"decoding-samples",
                                                                    "overview-live"}
    expect(samples).to_have_attribute("data-stale", "")
    expect(samples).to_have_attribute("aria-busy", "true")
    assert asked == []
    ids = model.tokenizer.encode_ordinary(PROMPT)
    from pipeline.sampling import sampler
    settings = SamplerSettings(temperature=0.3, top_k=40, top_p=0.9, min_p=0.05)
    tokens = [p.token for p in decode_loop(model, ids, 6, sample=sampler(settings, 0))]
    row = table.get_by_role("row", name=re.compile("sample, seed 0"))
    with page.expect_response(lambda r: "/section/decoding" in r.url):
        row.scroll_into_view_if_needed()
    expect(samples).not_to_have_attribute("data-stale", "")
    expect(samples).not_to_have_attribute("aria-busy", "true")
    expect(row).to_contain_text(model.tokenizer.decode(tokens).strip())
    assert len(asked) == 1 and "s_temp=0.3" in asked[0]
    # the overview's live part (replaced whole when it follows) too, once: up to date, it asks
    # for nothing more until its own control moves
    live = page.locator("#overview-live")
    expect(live).to_have_attribute("data-stale", "")
    overview_asked = []
    page.on("request", lambda r: overview_asked.append(r.url) if "/overview" in r.url else None)
    with page.expect_response(lambda r: "/overview" in r.url):
        page.locator("#overview").scroll_into_view_if_needed()
    expect(live).not_to_have_attribute("data-stale", "")
    expect(page.locator("#ov-temp")).to_have_value("0.3")
    page.locator("#ov-temp").focus()
    with page.expect_response(lambda r: "/overview" in r.url):
        page.keyboard.press("ArrowRight")
    expect(page).to_have_url(re.compile(r"s_temp=0.35"))
    assert len(overview_asked) == 2, overview_asked
    assert "s_temp=0.3&" in overview_asked[0] and "s_temp=0.35" in overview_asked[1]


def test_a_refused_refresh_stays_marked_and_asks_again(page, model):
    """The samples' own refresh, refused as busy (a 503, as the server's gate answers), leaves
    them marked out of date, not forgotten: they ask again, and the second answer brings the
    new settings' draws and clears the mark."""
    table, slider, samples = samples_below(page, "dec-beams")
    refused = []

    def busy_once(route):
        if refused:
            route.continue_()
            return
        refused.append(route.request.url)
        route.fulfill(status=503, headers={"Retry-After": "1"}, body="busy")
    page.route(re.compile(r"/section/decoding\?"), busy_once)
    with page.expect_response(lambda r: "/section/sampling" in r.url):
        slider.fill("0.3")
    expect(samples).to_have_attribute("data-stale", "")
    row = table.get_by_role("row", name=re.compile("sample, seed 0"))
    with page.expect_response(lambda r: "/section/decoding" in r.url and r.status == 503):
        row.scroll_into_view_if_needed()
    expect(samples).to_have_attribute("data-stale", "")        # still out of date
    with page.expect_response(lambda r: "/section/decoding" in r.url and r.status == 200):
        pass                                                   # asked again, by itself
    expect(samples).not_to_have_attribute("data-stale", "")
    ids = model.tokenizer.encode_ordinary(PROMPT)
    from pipeline.sampling import sampler
    settings = SamplerSettings(temperature=0.3, top_k=40, top_p=0.9, min_p=0.05)
    tokens = [p.token for p in decode_loop(model, ids, 6, sample=sampler(settings, 0))]
    expect(row).to_contain_text(model.tokenizer.decode(tokens).strip())
    assert len(refused) == 1 and "s_temp=0.3" in refused[0]


def test_a_beam_control_leaves_samples_out_of_sight_for_later(page, model):
    """Samples left out of date by a sampling control, still out of sight when a beam control
    moves: that control's answer (the part around them) does not compute them either; it says
    they are coming, and scrolled to, they show the draws of the new settings."""
    page.set_viewport_size({"width": 1280, "height": 480})
    page.goto("/?prompt=" + PROMPT + "&open=dec-beams#sampling")
    samples = page.locator("#decoding-samples")
    expect(samples.get_by_role("table", name="Greedy, best beam and samples")).to_be_attached()

    def below():
        return samples.evaluate("el => el.getBoundingClientRect().top - window.innerHeight")
    slider = sampling(page).get_by_role("slider", name="Temperature")
    slider.scroll_into_view_if_needed()
    assert below() > 300, "the samples are not out of sight"
    with page.expect_response(lambda r: "/section/sampling" in r.url):
        slider.fill("0.4")
    expect(samples).to_have_attribute("data-stale", "")
    width = decoding(page).get_by_role("slider", name=re.compile("Beam width"))
    width.scroll_into_view_if_needed()
    assert below() > 300, "the samples are not out of sight"
    with page.expect_response(lambda r: "/section/decoding" in r.url) as answer:
        width.fill("2")
    assert answer.value.headers.get("x-stale") == "decoding-samples"
    expect(samples.get_by_text("Drawing the samples as they come into view")).to_be_attached()
    expect(samples).to_have_attribute("data-stale", "")
    ids = model.tokenizer.encode_ordinary(PROMPT)
    from pipeline.sampling import sampler
    settings = SamplerSettings(temperature=0.4, top_k=40, top_p=0.9, min_p=0.05)
    tokens = [p.token for p in decode_loop(model, ids, 6, sample=sampler(settings, 0))]
    with page.expect_response(lambda r: "/section/decoding" in r.url) as fetched:
        samples.scroll_into_view_if_needed()
    assert "b_width=2" in fetched.value.url and "s_temp=0.4" in fetched.value.url
    row = samples.get_by_role("row", name=re.compile("sample, seed 0"))
    expect(row).to_contain_text(model.tokenizer.decode(tokens).strip())
    expect(samples).not_to_have_attribute("data-stale", "")


def test_the_samples_are_drawn_when_their_disclosure_opens(page, model):
    """Closed, the disclosure holds no samples (a sampling control does not wait for them);
    opening it fetches them, drawn with the sampling section's settings."""
    page.goto("/?prompt=" + PROMPT + "&s_temp=0.3#decoding")
    table = decoding(page).get_by_role("table", name="Greedy, best beam and samples")
    expect(decoding(page).locator("#dec-samples-wait")).to_be_attached()
    expect(table).to_have_count(0)
    decoding(page).get_by_text("the final beams, greedy and samples side by side").click()
    ids = model.tokenizer.encode_ordinary(PROMPT)
    from pipeline.sampling import sampler
    settings = SamplerSettings(temperature=0.3, top_k=40, top_p=0.9, min_p=0.05)
    tokens = [p.token for p in decode_loop(model, ids, 6, sample=sampler(settings, 0))]
    row = table.get_by_role("row", name=re.compile("sample, seed 0"))
    expect(row).to_contain_text(model.tokenizer.decode(tokens).strip())
    expect(page).to_have_url(re.compile(r"open=dec-beams"))
