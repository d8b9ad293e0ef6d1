"""The sampling section shows what pipeline/sampling.py computes on the prompt's real logits:
each stage's distribution, the seeded draw, N draws and their chi-square test; every bad value
is a 4xx naming its control."""
import html
import json
import math
import re

import numpy as np
import pytest

from pipeline.sampling import SamplerSettings, draw, sample_next, sampling_stages
from pipeline.statistics import goodness_of_fit
from web.presentation.numbers import percent
from web.presentation.tokens import plain
from web.sections.sampling import EXAMPLE, PARAMS, drawn_tv_distance, shown_tokens
from web_support import error_message, every_section, table_rows, text_of, url

PROMPT = "Elizabeth was very much surprised; she had not expected to see Mr. Darcy"
STAGES = ["model", "repetition penalty", "temperature", "top-k", "top-p", "min-p"]


def pct(p) -> str:
    """A probability as the Sampling section writes it (numbers.percent: two decimals, "<0.01%"
    below 0.0001, "0%" for 0)."""
    return percent(p, 2, 0.0001)


def expected(model, prompt, settings):
    ids = list(prompt_ids_of(model, prompt))
    logits = model.forward(ids)[-1]
    return ids, logits, sampling_stages(logits, ids, settings)


def prompt_ids_of(model, prompt):
    return model.tokenizer.encode_ordinary(prompt)


SETTINGS = [
    dict(),
    dict(s_temp="0.7", s_topk="5"),
    dict(s_rep="1.5", s_topp="0.8"),
    dict(s_temp="1.8", s_minp="0.1"),
    dict(s_temp="0", s_rep="1.2"),
    dict(s_topk="8"),                       # all survivors shown: the others hold exactly 0%
    dict(s_rep="1.3", s_temp="1.2", s_topk="40", s_topp="0.9", s_minp="0.05"),
]


DEFAULTS = {p.name: p.default for p in PARAMS}


def settings_of(q):
    """The sampler a query sets: its values, the section's defaults for the rest."""
    q = {**DEFAULTS, **q}
    return SamplerSettings(repetition_penalty=float(q["s_rep"]), temperature=float(q["s_temp"]),
                           top_k=int(q["s_topk"]), top_p=float(q["s_topp"]),
                           min_p=float(q["s_minp"]))


@pytest.mark.parametrize("query", SETTINGS)
def test_stage_table_is_the_pipelines_distribution(client, model, query):
    r = client.get(url("/section/sampling", prompt=PROMPT, **query))
    assert r.status_code == 200
    page = text_of(r)
    ids, logits, stages = expected(model, PROMPT, settings_of(query))
    shown = shown_tokens(stages)
    rows = table_rows(page, "Distribution after each stage", headers=True)
    names = [plain(model.tokenizer.decode_single_token_bytes(t)) for t in shown]
    assert [row[0] for row in rows[:len(shown)]] == names
    for row, t in zip(rows, shown, strict=False):
        assert row[1:] == [pct(st.probs[t]) if st.kept[t] else "removed" for st in stages]
    others = np.ones(len(logits), dtype=bool)
    others[shown] = False
    assert rows[len(shown)] == ["all other tokens"] + [pct(st.probs[others].sum(dtype=np.float64))
                                                       for st in stages]
    assert rows[len(shown) + 1] == ["tokens left"] + [f"{int(st.kept.sum()):,}" for st in stages]
    final = stages[-1].probs
    assert f"{int((final > 0).sum()):,} of 4,096 tokens can be drawn" in page
    table = page.split('aria-label="Distribution after each stage"')[1]
    heads = re.findall(r'<th scope="col">([a-z -]+)', table)
    assert [h.strip() for h in heads[1:7]] == STAGES


def test_the_seeded_draw_is_sample_next_with_that_seed(client, model):
    q = dict(s_temp="1.5", s_topk="20", s_seed="41")
    page = text_of(client.get(url("/section/sampling", prompt=PROMPT, **q)))
    ids = prompt_ids_of(model, PROMPT)
    logits = model.forward(ids)[-1]
    token = sample_next(logits, ids, settings_of(q), np.random.default_rng(41))
    u = np.random.default_rng(41).random()
    m = re.search(r'id="one-draw">Seed 41: u = ([0-9.]+),.*?\(token (\d+), probability', page, re.S)
    assert m and int(m.group(2)) == token and m.group(1) == f"{u:.4f}"
    # the same seed gives the same token on another request
    again = text_of(client.get(url("/section/sampling", prompt=PROMPT, **q)))
    assert re.search(r"\(token (\d+), probability", again).group(1) == str(token)


def test_many_draws_are_counted_and_tested(client, model):
    q = dict(s_temp="1.2", s_topp="0.95", s_seed="7", s_draws="5000")
    page = text_of(client.get(url("/section/sampling", prompt=PROMPT, **q)))
    ids = prompt_ids_of(model, PROMPT)
    stages = sampling_stages(model.forward(ids)[-1], ids, settings_of(q))
    final = stages[-1].probs
    counts = np.bincount(draw(final, np.random.default_rng(7), 5000), minlength=len(final))
    shown = shown_tokens(stages)
    rows = table_rows(page, "Draws against prediction", headers=True)
    body = {r[0]: r[1:] for r in rows}
    for t in shown:
        if final[t] > 0 or counts[t] > 0:
            name = plain(model.tokenizer.decode_single_token_bytes(t))
            assert body[name] == [f"{counts[t]:,}", f"{final[t] * 5000:.1f}", pct(final[t])]
    fit = goodness_of_fit(counts, final)
    assert f"χ² = {fit.statistic:.2f} with {fit.dof} degree" in page
    assert fit.dof >= 3


def test_the_example_prompt_is_offered_and_run(client, model):
    page = text_of(client.get(url("/section/sampling", s_temp="0.5")))
    link = re.search(r'<a href="([^"]+)">Use it as the prompt</a>', page).group(1)
    assert html.unescape(link) == "/?prompt=It%20was%20a%20beautiful&s_temp=0.5#sampling"
    ids = prompt_ids_of(model, EXAMPLE)
    probs = sampling_stages(model.forward(ids)[-1], ids, SamplerSettings())[0].probs
    top = int(np.argmax(probs))
    name = html.escape(plain(model.tokenizer.decode_single_token_bytes(top)))
    assert f"<q class=\"pair\">{name}</q> {pct(probs[top])}" in page


@pytest.mark.parametrize("name, value, status, words", [
    ("s_temp", "2.5", 422, "Temperature must be between 0 and 2"),
    ("s_temp", "hot", 400, "Temperature"),
    ("s_temp", "nan", 400, "Temperature"),
    ("s_temp", "inf", 400, "Temperature"),
    ("s_temp", "1e3", 400, "Temperature"),
    ("s_topk", "-1", 422, "Top-k"),
    ("s_topk", "2.5", 400, "Top-k must be a whole number"),
    ("s_topp", "0", 422, "Top-p must be greater than 0"),
    ("s_topp", "1.01", 422, "Top-p must be between 0 and 1"),
    ("s_minp", "-0.1", 422, "Min-p"),
    ("s_rep", "0", 422, "Repetition penalty must be greater than 0"),
    ("s_rep", "3", 422, "Repetition penalty must be between 0 and 2"),
    ("s_seed", "-5", 422, "Seed"),
    ("s_draws", "0", 422, "Number of draws must be between 1 and 100000"),
    ("s_draws", "100001", 422, "Number of draws"),
])
def test_bad_values_are_4xx_with_the_message_at_the_control(client, name, value, status, words):
    # the whole page answers the same as the section: checked for one value per parameter
    paths = ["/section/sampling"] + (["/"] if value in ("hot", "0", "-1", "3", "-5") else [])
    for path in paths:
        r = client.get(url(path, **{name: value}), headers=every_section())
        assert r.status_code == status
        assert words in error_message(text_of(r), name)
        assert 'aria-invalid="true"' in text_of(r)


def test_default_values_leave_the_url_and_others_stay(client):
    r = client.get(url("/section/sampling", s_temp="0.7", s_topk="40"),
                   headers={"HX-Request": "true"})
    assert r.headers["HX-Push-Url"] == "/?s_temp=0.7"


def test_every_default_setting_changes_the_default_prompts_distribution(client, model):
    """The defaults show each stage at work: on the default prompt every filter removes tokens
    and temperature reshapes; the penalty, off by default, is the one stage listed as idle."""
    from web.core.params import PROMPT as PROMPT_PARAM
    ids = prompt_ids_of(model, PROMPT_PARAM.default)
    stages = sampling_stages(model.forward(ids)[-1], ids, settings_of({}))
    kept = [int(st.kept.sum()) for st in stages]
    assert kept[3] < kept[2] and kept[4] < kept[3] and kept[5] < kept[4]     # k, p, min-p
    assert not np.allclose(stages[2].probs, stages[1].probs)                   # temperature
    page = text_of(client.get(url("/section/sampling")))
    note = re.search(r'id="stages-shown">(.*?)</p>', page, re.S).group(1)
    assert "Changed nothing here: repetition penalty = 1." in " ".join(note.split())
    # every stage's column has bars, the penalty's the same as the model's
    bars = stage_bars_of(page)
    assert [row[0] for row in bars] == [row[1] for row in bars]
    assert [row[2] for row in bars] != [row[1] for row in bars]


def test_total_variation_is_measured_over_the_drawn_groups(client, model):
    q = dict(s_seed="3", s_draws="2000")
    page = text_of(client.get(url("/section/sampling", prompt=PROMPT, **q)))
    ids = prompt_ids_of(model, PROMPT)
    stages = sampling_stages(model.forward(ids)[-1], ids, settings_of(q))
    final = stages[-1].probs.astype(np.float64)
    counts = np.bincount(draw(stages[-1].probs, np.random.default_rng(3), 2000),
                         minlength=len(final))
    shown = shown_tokens(stages)
    others = np.ones(len(final), dtype=bool)
    others[shown] = False
    groups_n = [int(counts[t]) for t in shown] + [int(counts[others].sum())]
    groups_p = [float(final[t]) for t in shown] + [float(final[others].sum())]
    tv = 0.5 * sum(abs(c / 2000 - p) for c, p in zip(groups_n, groups_p, strict=True))
    assert math.isclose(drawn_tv_distance(groups_n, groups_p), tv)
    assert re.search(r'id="tv">.*?<strong>%s</strong>' % re.escape(f"{tv:.4f}"), page, re.S)


def test_a_disclosure_named_in_the_url_is_open(client):
    closed = text_of(client.get(url("/section/sampling")))
    assert re.search(r'<details class="deeper" id="deeper-sp-many" data-deeper="sp-many">', closed)
    page = text_of(client.get(url("/section/sampling", open="sp-many")))
    assert re.search(r'<details class="deeper" id="deeper-sp-many" data-deeper="sp-many" open>',
                     page)


def test_plotly_labels_escape_markup_with_references_plotly_decodes():
    from web.figures import label
    assert label('<b>"a" & \'b\'</b>') == "&lt;b&gt;&#34;a&#34; &amp; &#39;b&#39;&lt;/b&gt;"
    # plotly.js decodes numeric references and only these named ones (svg_text_utils)
    for ref in re.findall(r"&([a-z]+);", label('<>&"\'')):
        assert ref in {"amp", "lt", "gt"}


@pytest.mark.parametrize("query", [dict(), dict(s_temp="1.4", s_topk="3")])
def test_headline_figure_is_the_model_against_the_distribution_drawn_from(client, model, query):
    """The section's first figure: each shown token's probability from the model and after the
    five controls (0 where a control removed it), as pipeline/sampling.py computes them."""
    page = text_of(client.get(url("/section/sampling", prompt=PROMPT, **query)))
    fig = json.loads(html.unescape(re.search(r'data-figure="([^"]+)"', page).group(1)))
    ids, _, stages = expected(model, PROMPT, settings_of(query))
    shown = shown_tokens(stages)
    model_bars, final_bars = fig["data"]
    assert np.allclose(model_bars["y"], [stages[0].probs[t] for t in shown], atol=1e-6)
    assert np.allclose(final_bars["y"], [stages[-1].probs[t] if stages[-1].kept[t] else 0.0
                                         for t in shown], atol=1e-6)
    assert [y > 0 for y in final_bars["y"]] == [bool(stages[-1].kept[t]) for t in shown]


@pytest.mark.parametrize("seed", range(0, 40))
def test_the_draws_uniform_lies_in_the_slice_shown_for_the_drawn_token(client, seed):
    """The page's "u = ..., in the slice [a, b) of <token>": u falls in that token's slice as
    inverse_cdf lays the slices (most probable first), for many seeds and a flat sampler."""
    page = text_of(client.get(url("/section/sampling", s_seed=seed, s_temp=1.5, s_topk=0,
                                  s_topp=1.0), headers={"HX-Request": "true"}))
    m = re.search(r"u = ([0-9.]+), in the slice\s+\[([0-9.]+), ([0-9.]+)\)", page)
    assert m, "no draw on the page"
    u, lo, hi = map(float, m.groups())
    assert lo <= u < hi


def figures_of(page: str) -> list:
    return [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]+)"', page)]


def stage_bars_of(page: str) -> list:
    """The bars of the stage table's token rows: per row, per stage, (width %, colour) or None."""
    table = re.search(r'aria-label="Distribution after each stage"(.*?)</table>', page,
                      re.S).group(1)
    rows = []
    for tr in re.findall(r"<tr><th scope=\"row\"><q class=\"pair\">.*?</tr>", table, re.S):
        rows.append([(float(m.group(1)), m.group(2)) if (m := re.search(
            r'width:([0-9.]+)%;background:(#[0-9a-f]{6})', td)) else None
            for td in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)])
    return rows


@pytest.mark.parametrize("query", [dict(), dict(s_temp="0.4", s_topk="5"),
                                   dict(s_temp="1.8", s_topp="0.5"), dict(s_rep="1.5")])
def test_stage_bars_share_one_scale_the_tallest_bar(client, model, query):
    """The stage table's bars: a survivor's is its probability after the stage, a token the stage
    removed keeps a grey bar of what it had just before, one removed earlier has none; every bar on
    one scale (the tallest of all is 100%), so a stage that sharpens or flattens is seen to."""
    from web.sections.sampling import BAR_FINAL, BAR_GONE, BAR_KEPT
    page = text_of(client.get(url("/section/sampling", prompt=PROMPT, open="sp-stages", **query)))
    ids, _, stages = expected(model, PROMPT, settings_of(query))
    shown = shown_tokens(stages)
    want = []
    for t in shown:
        row, alive = [], True
        for j, st in enumerate(stages):
            if st.kept[t]:
                row.append((float(st.probs[t]), BAR_FINAL if j == len(stages) - 1 else BAR_KEPT))
            elif alive:
                row.append((float(stages[j - 1].probs[t]), BAR_GONE))
            else:
                row.append(None)
            alive = bool(st.kept[t])
        want.append(row)
    top = max(h for row in want for h, _ in filter(None, row))
    bars = stage_bars_of(page)
    assert len(bars) == len(shown)
    for got_row, want_row in zip(bars, want, strict=True):
        assert [b is None for b in got_row] == [w is None for w in want_row]
        for got, w in zip(got_row, want_row, strict=True):
            if w is not None:
                assert got[1] == w[1] and abs(got[0] - 100 * w[0] / top) <= 0.051
    assert max(w for row in bars for w, _ in filter(None, row)) == 100.0
    # the bars differ between stages, so one shared scale is not the same as each stage's own
    tops = [max((row[j][0] for row in bars if row[j]), default=0) for j in range(len(stages))]
    assert min(tops) < 0.9 * max(tops)
