"""The attention-tiling section shows what pipeline/tiling.py computes on the live model."""
import html
import re

import numpy as np
import pytest

from pipeline.published import published
from pipeline.tiling import plain_traffic, tiled_traffic
from web.model_state.explainer import KNOWN_CARDS
from web.sections.tiling import largest_tile
from web_support import HX, error_message, text_of, url

PROMPT = "It is a truth universally acknowledged, that a single man"


def plain_text(page):
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_the_tiled_run_matches_the_engine_and_the_traffic_formulas(client, model):
    T = len(model.tokenizer.encode(PROMPT))
    page = text_of(client.get(url("/section/tiling", prompt=PROMPT, til_bq=4, til_bk=6,
                                  til_layer=2, til_head=5), headers=HX))
    text = plain_text(page)
    diff = float(re.search(r"tiled = engine within ([0-9.e+-]+)", text).group(1))
    assert diff < 1e-4 and "the same result" in text
    assert "query head 5 (it reads key/value head 1)" in text
    tiled = tiled_traffic(T, 32, 4, 6).total * 4
    plain = plain_traffic(T, 32).total * 4
    assert "tiled, 4 × 6 tiles" in text
    assert re.search(rf"4 × 6 tiles .*? {tiled:,} ", text)
    assert re.search(rf"P stored \({T} × {T} each\) .*? {plain:,} ", text)


def test_real_scale_numbers_are_the_formula_on_the_published_config(client):
    page = text_of(client.get(url("/section/tiling", til_model="Llama 3.1 70B",
                                  til_len=32768), headers=HX))
    text = plain_text(page)
    c = published("Llama 3.1 70B").config
    tile = largest_tile(c.head_dim)
    assert f"head width {c.head_dim}" in text
    assert f"{plain_traffic(32768, c.head_dim).total * 2:,} bytes for one head" in text
    assert f"{tiled_traffic(32768, c.head_dim, tile, tile).total * 2:,}" in text


@pytest.mark.parametrize("query,name,message", [
    (dict(til_layer=4), "til_layer", "Layer 4 does not exist: this model has 4 layers"),
    (dict(til_head=8), "til_head", "Query head 8 does not exist: this model has 8 query heads"),
    (dict(til_bq=0), "til_bq", "between 1 and 256"),
    (dict(til_bk="x"), "til_bk", "must be a whole number"),
    (dict(til_bq=1, til_bk=1, prompt="word " * 120), "til_bq", "choose larger tiles"),
    (dict(til_row=500), "til_row", "Row 500 does not exist"),
    (dict(til_model="GPT-5"), "til_model", "Published model must be one of GPT-2 small, "),
    (dict(til_len=300000), "til_len", "between 256 and 131072"),
])
def test_bad_values_get_a_message_and_a_4xx(client, query, name, message):
    response = client.get(url("/section/tiling", **query), headers=HX)
    assert 400 <= response.status_code < 500
    assert message in error_message(text_of(response), name)


def test_default_row_is_one_whose_maximum_rises_in_a_later_tile(client, model):
    """Without a row of its own the section follows the last row whose largest score comes after
    its first key tile (from the engine's scores), so the rescale shows; the page says why."""
    from pipeline.tiling import tiled_attention
    ids = model.tokenizer.encode_ordinary(PROMPT)
    _, cache = model.run_with_cache(ids)
    scores = cache["blocks.0.attn.hook_attn_scores"][0]
    expected = max(r for r in range(len(ids)) if int(np.argmax(scores[r, :r + 1])) >= 8)
    # 8 x 8 tiles: this 12-token prompt fits one tile of the default 16 x 16
    page = text_of(client.get(url("/section/tiling", prompt=PROMPT, til_bq=8, til_bk=8),
                              headers=HX))
    text = plain_text(page)
    assert f"Row {expected}, tile by tile." in text
    assert f'<option value="{expected}" selected>' in page
    assert "It is the last row whose largest score comes after its first key tile" in text
    # its online softmax rescales after the first tile: some step's factor is below 1
    rot_q = cache["blocks.0.attn.hook_rot_q"][:, 0]
    rot_k, v = cache["blocks.0.attn.hook_rot_k"][:, 0], cache["blocks.0.attn.hook_v"][:, 0]
    _, _, steps = tiled_attention(rot_q, rot_k, v, 8, 8, watch_row=expected)
    assert any(s.rescale < 1 for s in steps[1:])
    for s in steps:
        assert f"{s.m:.4f} {s.rescale:.4f} {s.l:.4f}" in text
    # a row chosen by the reader is kept, and the page says when it rescales nothing
    first = next(r for r in range(1, len(ids)) if int(np.argmax(scores[r, :r + 1])) < 8)
    text = plain_text(text_of(client.get(url("/section/tiling", prompt=PROMPT, til_row=first,
                                             til_bq=8, til_bk=8), headers=HX)))
    assert f"Row {first}, tile by tile." in text
    assert f"nothing is rescaled (row {expected} shows a rescale)" in text


def test_disclosure_open_from_the_url(client):
    page = text_of(client.get(url("/section/tiling", open="til-traffic"), headers=HX))
    assert re.search(r'<details class="deeper" id="deeper-til-traffic"[^>]*\bopen\b', page)
    page = text_of(client.get(url("/section/tiling"), headers=HX))
    assert not re.search(r'<details class="deeper" id="deeper-til-traffic"[^>]*\bopen\b', page)


def defaults():
    from web.sections.tiling import PARAMS
    d = {p.name: p.default for p in PARAMS}
    return d["til_bq"], d["til_bk"]


def test_default_tiles_move_less_than_plain_and_smaller_ones_are_one_click_away(client, model):
    """At the defaults, on the default prompt, the tiled run moves fewer bytes than plain
    attention (the section's lesson); the page names the tile size at which it would move more,
    with its bytes, and offers it."""
    from web.sections.tiling import tile_sweep
    page = text_of(client.get(url("/section/tiling", open="til-traffic"), headers=HX))
    text = plain_text(page)
    T = int(re.search(r"P stored \((\d+) × \1 each\)", text).group(1))
    hd = model.config.d_model // model.config.n_heads
    bq, bk = defaults()
    tiled, plain = tiled_traffic(T, hd, bq, bk).total * 4, plain_traffic(T, hd).total * 4
    assert tiled < plain
    assert re.search(rf"{bq} × {bk} tiles .*? {tiled:,} ", text)
    assert f"Tiling moves {plain / tiled:.2f} times less here" in text
    more = [b for b in tile_sweep(T) if tiled_traffic(T, hd, b, b).total * 4 > plain]
    assert more, "some smaller tile moves more on the default prompt"
    b = more[-1]
    assert re.search(rf"with {b} × {b} tiles this prompt moves "
                     rf"{tiled_traffic(T, hd, b, b).total * 4:,} bytes, more ?than plain "
                     rf"attention's {plain:,}", text)
    assert f"hx-vals='{{\"til_bq\": \"{b}\", \"til_bk\": \"{b}\"}}'>try {b} × {b}</button>" in page
    # that value, chosen, says so and offers the way back
    text = plain_text(text_of(client.get(url("/section/tiling", til_bq=b, til_bk=b,
                                             open="til-traffic"), headers=HX)))
    assert re.search(rf"Here tiling moves more ?: {tiled_traffic(T, hd, b, b).total * 4:,} bytes "
                     rf"against {plain:,}\.", text)
    less = next(s for s in tile_sweep(T) if tiled_traffic(T, hd, s, s).total * 4 < plain)
    assert f"From {less} × {less} tiles on, tiling moves less" in text


@pytest.mark.parametrize("prompt", KNOWN_CARDS["austen"].prompts)
def test_default_tiles_move_less_on_every_suggested_prompt(model, prompt):
    """The Austen model's suggested prompts (a class clicks them) all show the saving at the
    default tiles."""
    T = len(model.tokenizer.encode_ordinary(prompt))
    hd = model.config.d_model // model.config.n_heads
    bq, bk = defaults()
    assert tiled_traffic(T, hd, bq, bk).total < plain_traffic(T, hd).total
