"""The attention section shows the weights and scores of the prompt's real forward pass."""
import base64
import html
import json
import re
import struct
import zlib

import numpy as np
import pytest

from engine_support import get_model
from pipeline.attention_analysis import attention_row, head_measures, stack_layers, strongest_heads
from pipeline.model import softmax
from web.figures.attention import THUMB_MASKED, THUMB_PALETTE
from web.model_state.forward import prompt_run
from web.model_state.loaded import LoadedModel
from web.sections import attention
from web_support import HX, error_message, every_section, reading_text, table_rows, text_of, url

PROMPT = "Mr. Darcy bowed to Elizabeth, and Elizabeth smiled at Mr. Darcy."


def run_of(model, prompt=PROMPT):
    return prompt_run(LoadedModel.wrap(model, probe_encodings=False), prompt)


def shown_percents(page):
    """[(token text, "12.3%" or "masked")] of the clicked token's row of chips."""
    m = re.search(r'<ol[^>]*aria-label="Attention from the clicked token"[^>]*>(.*?)</ol>',
                  page, re.S)
    assert m
    return re.findall(r'<span class="pct">([^<]*)</span>', m.group(1))


def figures_of(page, section="attention"):
    body = page.split(f'<section id="{section}"', 1)[1].split("</section>", 1)[0]
    return [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', body)]


def png_pixels(uri):
    """(palette, indices [h, w]) of an 8-bit indexed PNG data URI written by the page, read
    chunk by chunk (every row's filter byte must be 0, none)."""
    raw = base64.b64decode(uri.split(",", 1)[1])
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(raw):
        n, = struct.unpack(">I", raw[at:at + 4])
        kind, data = raw[at + 4:at + 8], raw[at + 8:at + 8 + n]
        assert struct.unpack(">I", raw[at + 8 + n:at + 12 + n])[0] == zlib.crc32(kind + data)
        chunks[kind] = chunks.get(kind, b"") + data
        at += 12 + n
    w, h, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 3)                              # 8-bit, indexed
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, w + 1)
    assert (rows[:, 0] == 0).all()
    palette = [tuple(chunks[b"PLTE"][i:i + 3]) for i in range(0, len(chunks[b"PLTE"]), 3)]
    return palette, rows[:, 1:]


def thumbnails_of(page):
    """{(layer, head): (chosen, data URI)} of the section's thumbnails of every head."""
    found = re.findall(r'<button type="button" class="att-thumb( chosen)?"[^>]*aria-pressed="(\w+)"'
                       r'\s+aria-label="layer (\d+), head (\d+)"[^>]*><img\s+src="([^"]+)"', page)
    assert found
    for chosen, pressed, *_ in found:
        assert bool(chosen) == (pressed == "true")
    return {(int(i), int(h)): (bool(chosen), uri) for chosen, _, i, h, uri in found}


@pytest.mark.parametrize("layer,head", [(0, "3"), (3, "7"), (1, "mean")])
def test_clicked_tokens_weights_are_the_models(client, model, layer, head):
    run = run_of(model)
    t = 9
    page = text_of(client.get(url("/", prompt=PROMPT, att_layer=layer, att_head=head,
                                  att_token=t), headers=every_section()))
    pattern = run.cache[f"blocks.{layer}.attn.hook_pattern"]
    want = attention_row(pattern, None if head == "mean" else int(head), t)
    if head == "mean":
        np.testing.assert_allclose(want, pattern[:, t, :t + 1].mean(0), rtol=1e-6)
    shown = shown_percents(page)
    masked = ["masked"] * (len(run.ids) - t - 1)
    assert shown == ["%.1f%%" % (100 * float(w)) for w in want] + masked


def test_the_default_is_the_last_token_of_the_last_layer_head_0(client, model):
    run = run_of(model)
    page = text_of(client.get(url("/", prompt=PROMPT), headers=every_section()))
    L, T = model.config.n_layers, len(run.ids)
    want = run.cache[f"blocks.{L - 1}.attn.hook_pattern"][0, T - 1]
    assert shown_percents(page) == ["%.1f%%" % (100 * float(w)) for w in want]
    assert '<option value="3" selected>layer 3</option>' in page


def test_softmax_table_recomputes_the_pattern_row(client, model):
    run = run_of(model)
    layer, head, t = 2, 5, 7
    page = text_of(client.get(url("/", prompt=PROMPT, att_layer=layer, att_head=head,
                                  att_token=t), headers=every_section()))
    scores = run.cache[f"blocks.{layer}.attn.hook_attn_scores"][head, t]
    pattern = run.cache[f"blocks.{layer}.attn.hook_pattern"][head, t]
    rows = table_rows(page, "Softmax of the clicked token's scores")
    assert len(rows) == t + 1
    mine = softmax(scores[:t + 1])
    for s, row in enumerate(rows):
        assert row[0].startswith(f"{s} ")
        assert row[1:] == ["%.4f" % scores[s], "%.4f" % np.exp(scores[s] - scores[:t + 1].max()),
                           "%.4f" % mine[s], "%.4f" % pattern[s]]
    assert "equals the row of the pattern the model used" in page
    assert f"the {len(run.ids) - t - 1} masked" in page


def test_thumbnails_are_every_heads_pattern_with_the_mask_marked(client, model):
    run = run_of(model)
    page = text_of(client.get(url("/", prompt=PROMPT), headers=every_section()))
    thumbs = thumbnails_of(page)
    L, H, T = model.config.n_layers, model.config.n_heads, len(run.ids)
    assert sorted(thumbs) == [(i, h) for i in range(L) for h in range(H)]
    patterns = stack_layers(run.cache, "attn.hook_pattern", L)
    below = np.tri(T, T, dtype=bool)
    for (i, h), (_, uri) in thumbs.items():
        palette, got = png_pixels(uri)
        assert palette == THUMB_PALETTE and got.shape == (T, T)
        assert (got[~below] == THUMB_MASKED).all()              # masked: grey, not a 0 weight
        np.testing.assert_array_equal(got[below], np.rint(patterns[i, h][below] * 100))
    assert palette[0] == (255, 255, 255) and palette[100] == (8, 48, 107)   # WEIGHTS' ends
    assert palette[THUMB_MASKED] == (0xc9, 0xcc, 0xd3)
    assert sum(len(uri) for _, uri in thumbs.values()) < 60_000


def test_the_thumbnails_are_drawn_once_per_prompt(client, model):
    """Another layer, head or token shows the same thumbnails without drawing them again; a
    new prompt draws its own, its patterns' (the test above checks their pixels)."""
    prompt = "Kitty coughed, and Lydia laughed at her."
    first = thumbnails_of(text_of(client.get(url("/section/attention", prompt=prompt),
                                             headers=HX)))
    drawn = attention._thumbnails.computed
    for query in (dict(att_layer=1), dict(att_head="3"), dict(att_token=2, att_head="mean")):
        page = text_of(client.get(url("/section/attention", prompt=prompt, **query), headers=HX))
        assert {k: uri for k, (_, uri) in thumbnails_of(page).items()} == \
            {k: uri for k, (_, uri) in first.items()}
    assert attention._thumbnails.computed == drawn
    other = thumbnails_of(text_of(client.get(url("/section/attention", prompt=prompt + " No."),
                                             headers=HX)))
    assert attention._thumbnails.computed == drawn + 1 and other != first


@pytest.mark.parametrize("layer,head,chosen", [(2, "5", [(2, 5)]), (0, "mean", None)])
def test_the_chosen_head_is_the_one_outlined_and_labelled(client, model, layer, head, chosen):
    page = text_of(client.get(url("/", prompt=PROMPT, att_layer=layer, att_head=head),
                              headers=every_section()))
    H = model.config.n_heads
    chosen = chosen or [(layer, h) for h in range(H)]           # the mean: the layer's heads
    thumbs = thumbnails_of(page)
    assert sorted(k for k, (c, _) in thumbs.items() if c) == chosen
    labels = re.findall(r'<span class="att-thumb-name"[^>]*>(.*?)</span>', page)
    assert len(labels) == len(thumbs)
    assert [x for x in labels if "chosen" in x] == ([f"head {chosen[0][1]}<br>chosen"]
                                                    if head != "mean" else [])
    assert re.search(rf'<div class="att-layer chosen" role="group" aria-label="layer {layer}"',
                     page)
    # a click on a thumbnail asks for the whole section with that layer and head
    assert 'hx-vals=\'{"att_layer": "1", "att_head": "4"}\' ' in page


def test_large_views_are_the_heads_scores_and_weights_with_the_mask_grey(client, model):
    run = run_of(model)
    page = text_of(client.get(url("/", prompt=PROMPT, att_layer=1, att_head=6, att_token=4),
                              headers=every_section()))
    scores_fig, pattern_fig, _ = figures_of(page)
    T = len(run.ids)
    masked = ~np.tri(T, T, dtype=bool)
    for fig, name in [(scores_fig, "attn_scores"), (pattern_fig, "pattern")]:
        under, trace = fig["data"]
        assert under["hoverinfo"] == "skip" and under["colorscale"][0][1] == "#c9ccd3"
        z = np.frombuffer(base64.b64decode(trace["z"]["bdata"]), np.float32).reshape(T, T)
        want = run.cache[f"blocks.1.attn.hook_{name}"][6]
        assert np.isnan(z[masked]).all()                       # a gap: the grey shows through
        np.testing.assert_array_equal(z[~masked], want[~masked])
        assert fig["layout"]["shapes"][0]["y0"] == 3.5          # the clicked row outlined


def test_long_prompts_are_shown_in_blocks(client, model):
    prompt = " ".join(["Elizabeth walked to Netherfield in the rain."] * 12)
    run = run_of(model, prompt)
    T = len(run.ids)
    assert T > attention.GRID_MAX
    page = text_of(client.get(url("/", prompt=prompt), headers=every_section()))
    size = -(-T // attention.GRID_MAX)
    n = -(-T // size)
    assert f"a block of\n    {size} × {size} tokens" in page
    assert all(png_pixels(uri)[1].shape == (n, n) for _, uri in thumbnails_of(page).values())


def test_strongest_heads_are_named_with_their_numbers(client, model):
    run = run_of(model)
    page = text_of(client.get(url("/", prompt=PROMPT), headers=every_section()))
    patterns = stack_layers(run.cache, "attn.hook_pattern", model.config.n_layers)
    measures = head_measures(patterns, run.ids)
    assert measures["induction"] is not None                # "Mr. Darcy" and "Elizabeth" repeat
    items = re.findall(r"<li><strong>([\w-]+) heads:</strong>(.*?)</li>", page, re.S)
    assert [k for k, _ in items] == ["Previous-token", "First-token", "Same-token", "Induction"]
    for (_, text), kind in zip(items, ["previous", "first", "same", "induction"], strict=True):
        named = ", ".join(f"layer {i} head {h} ({v:.2f})"
                          for i, h, v in strongest_heads(measures[kind], 3))
        assert " ".join(text.split()) == named
    rows = table_rows(page, "Measured behaviour of every head")
    assert len(rows) == model.config.n_layers * model.config.n_heads
    assert rows[13][:5] == ["1", "5"] + ["%.3f" % measures[k][1, 5]
                                         for k in ("previous", "first", "same")]


def test_measures_are_drawn_as_one_bar_per_head(client, model):
    run = run_of(model)
    page = text_of(client.get(url("/", prompt=PROMPT), headers=every_section()))
    patterns = stack_layers(run.cache, "attn.hook_pattern", model.config.n_layers)
    measures = head_measures(patterns, run.ids)
    fig = figures_of(page)[-1]
    L, H = model.config.n_layers, model.config.n_heads
    bars = fig["data"]
    assert all(b["type"] == "bar" for b in bars) and len(bars) == 4 * L
    for k, kind in enumerate(["previous", "first", "same", "induction"]):
        for layer in range(L):
            b = bars[k * L + layer]
            assert b["name"] == f"layer {layer}" and len(b["y"]) == H
            np.testing.assert_allclose(b["y"], np.round(measures[kind][layer], 3))


def test_attention_disclosures_open_from_the_url(client):
    closed = text_of(client.get(url("/", prompt=PROMPT), headers=every_section()))
    assert '<details class="deeper" id="deeper-att-measures" data-deeper="att-measures">' in closed
    page = text_of(client.get(url("/", prompt=PROMPT, open="att-softmax,att-measures"),
                              headers=every_section()))
    for d in ("att-softmax", "att-measures"):
        assert f'<details class="deeper" id="deeper-{d}" data-deeper="{d}" open>' in page


def test_without_repeats_induction_is_not_measured_and_a_repeat_is_offered(client):
    prompt = "Emma was handsome, clever and rich"
    page = text_of(client.get(url("/", prompt=prompt, att_head="2"), headers=every_section()))
    assert "Induction cannot be measured here" in reading_text(page)

    m = re.search(r'<a href="([^"]*)" id="att-repeat">', page)
    r = client.get(html.unescape(m.group(1)), headers=every_section())
    assert r.status_code == 200
    repeated = text_of(r)
    assert "Induction heads:" in repeated and '<option value="2" selected>head 2' in repeated


def test_grouped_heads_are_stated(client):
    page = text_of(client.get("/", headers=every_section()))
    assert "Heads 0–3 share key/value head 0; Heads 4–7 share key/value head 1." in \
        " ".join(page.split())


def test_one_token_prompt(client):
    r = client.get(url("/", prompt="Emma"), headers=every_section())
    page = text_of(r)
    assert r.status_code == 200
    assert shown_percents(page) == ["100.0%"]
    assert "A prompt of one token has nothing to measure" in page


BAD = [({"att_token": "26"}, "att_token", 422, "Token 26 does not exist: this prompt has 26"),
       ({"att_token": "x"}, "att_token", 400, "whole number"),
       ({"att_token": "-1"}, "att_token", 422, "between"),
       ({"att_head": "8"}, "att_head", 422, "from 0 to 7, or \"mean\"; got '8'"),
       ({"att_head": "first"}, "att_head", 400, "got 'first'"),
       ({"att_head": ""}, "att_head", 400, "got ''"),
       ({"att_layer": "4"}, "att_layer", 422, "Layer 4 does not exist: this model has 4"),
       ({"att_layer": "1.5"}, "att_layer", 400, "whole number")]


@pytest.mark.parametrize("query,name,status,message", BAD)
@pytest.mark.parametrize("path", ["/", "/section/attention"])
def test_bad_values_get_a_4xx_and_a_message(client, query, name, status, message, path):
    r = client.get(url(path, **query), headers=every_section())
    assert r.status_code == status
    assert message in error_message(text_of(r), name)
    assert "HX-Push-Url" not in r.headers
    assert shown_percents(text_of(r))                        # the default view is still drawn


def test_token_html_stays_text(client):
    evil = "<img src=x onerror=alert(1)> said </script><script>alert(2)</script>"
    page = text_of(client.get(url("/section/attention", prompt=evil)))
    assert "<script>" not in page
    # the only images are the thumbnails, each a PNG written by the server
    images = re.findall(r"<img\b[^>]*>", page)
    assert images and all(re.fullmatch(r'<img\s+src="data:image/png;base64,[A-Za-z0-9+/=]+" '
                                       r'alt="">', img) for img in images)
    for fig in figures_of(page):
        assert "<img" not in json.dumps(fig)


@pytest.mark.parametrize("fixture", ["gpt2", "llama_mqa"])
def test_section_works_on_other_checkpoints(fixture):
    from app import create_app
    m = get_model(fixture)
    client = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                         "WARM_CACHES": False}).test_client()
    r = client.get(url("/section/attention", prompt="hello world, hello there",
                       att_head=str(m.config.n_heads - 1), att_token="2"))
    assert r.status_code == 200
    page = text_of(r)
    ids = m.tokenizer.encode_ordinary("hello world, hello there")
    _, cache = m.run_with_cache(ids)
    want = cache[f"blocks.{m.config.n_layers - 1}.attn.hook_pattern"][m.config.n_heads - 1, 2]
    assert shown_percents(page)[:3] == ["%.1f%%" % (100 * float(w)) for w in want[:3]]
    sharing = ("Every head has its own keys and values" if fixture == "gpt2"
               else "share one key/value head")
    assert sharing in page


def test_the_core_says_why_the_mask_before_the_mask_is_detailed(client):
    """Why later tokens are masked, said in the section's core where the mask is first shown:
    before the Go-deeper parts that give the masked scores −∞."""
    page = text_of(client.get(url("/section/attention", prompt=PROMPT), headers=HX))
    why = page.find('id="att-why-mask"')
    assert why > 0
    sentence = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", re.search(
        r'id="att-why-mask">(.*?)</p>', page, re.S).group(1)))
    assert "during generation the later tokens do not exist yet" in sentence
    assert "a token must not see the answer it is trained to predict" in sentence
    assert why < page.find("−∞") and why < page.find('att-softmax')
    assert why < page.find("every head at a glance".capitalize())


def test_the_core_names_the_previous_token_head_with_its_measure(client, model):
    """The core's headline: the head with the highest previous-token score, and that score, as
    pipeline.attention_analysis measures them on this prompt's patterns (the disclosure closed)."""
    run = run_of(model)
    patterns = stack_layers(run.cache, "attn.hook_pattern", model.config.n_layers)
    (layer, head, score), = strongest_heads(head_measures(patterns, run.ids)["previous"], 1)
    page = text_of(client.get(url("/section/attention", prompt=PROMPT), headers=HX))
    from web_support import reading_text  # without glossary definitions
    said = reading_text(re.search(r'<p id="att-headline">(.*?)</p>', page, re.S).group(1))
    assert (f"the head that looks most at the previous token is layer {layer}, head {head} "
            f"(both counted from 0): on average {100 * score:.0f}% of its attention goes to the "
            "token just before") in said
    assert page.index('id="att-headline"') < page.index('id="deeper-att-measures"')


def score_rule_said(page: str) -> str:
    m = re.search(r'<p id="att-score-rule">(.*?)</p>', page, re.S)
    assert m, "no score sentence"
    return " ".join(reading_text(m.group(1)).split())


def test_the_score_sentence_says_what_austen_computes(client, model):
    """Austen divides by sqrt(head width) and caps nothing: the sentence says so, with the
    scale the cached scores were made with (score / rotated q.k)."""
    page = text_of(client.get(url("/", prompt=PROMPT, att_layer=1, att_head=2,
                                  open="att-softmax"), headers=every_section()))
    said = score_rule_said(page)
    hd = model.config.head_dim
    assert f"divided by √{hd} (times {hd ** -0.5:.4f}) so the scores" in said
    for word in ("query_pre_attn_scalar", "tanh", "LongRoPE"):
        assert word not in said
    _, cache = model.run_with_cache(model.tokenizer.encode(PROMPT))
    q, k = cache["blocks.1.attn.hook_rot_q"][9, 2], cache["blocks.1.attn.hook_rot_k"][4, 2 // (
        model.config.n_heads // model.config.n_kv_heads)]
    assert abs(cache["blocks.1.attn.hook_attn_scores"][2, 9, 4] / float(q @ k)
               - hd ** -0.5) < 1e-5


@pytest.fixture(scope="module")
def gguf_client(tmp_path_factory):
    """An app per tiny GGUF checkpoint (tests/gguf_support.py): Gemma 2 (query_pre_attn_scalar,
    soft-cap), Phi-3 with LongRoPE (attention factor)."""
    import os

    from app import create_app
    from gguf_support import TESTS_DIR, write_checkpoint
    from pipeline import load_model
    with open(os.path.join(TESTS_DIR, "fixtures", "gguf_reference.json"), encoding="utf-8") as f:
        seeds = {n: r["seed"] for n, r in json.load(f)["tiny"].items()}
    directory = tmp_path_factory.mktemp("gguf")
    made = {}

    def make(name):
        if name not in made:
            m = load_model(write_checkpoint(str(directory / f"{name}.gguf"), name, seeds[name]))
            made[name] = m, create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                                        "WARM_CACHES": False}).test_client()
        return made[name]
    return make


def test_the_score_sentence_says_what_gemma2_computes(gguf_client):
    """Gemma 2: q.k / sqrt(query_pre_attn_scalar = 256, its head width), then 50 tanh(s / 50);
    the cached scores are exactly that."""
    model, client = gguf_client("gemma2_f32")
    page = text_of(client.get(url("/section/attention", prompt=PROMPT, att_layer=1, att_head=3,
                                  open="att-softmax"), headers=HX))
    said = score_rule_said(page)
    cfg = model.config
    assert cfg.head_dim == 256 and cfg.attn_softcap == 50.0
    assert ("divided by √256 (times 0.0625): Gemma's query_pre_attn_scalar, here the head width"
            in said)
    assert "squashed into (−50, 50): 50 · tanh(score / 50), Gemma 2's soft-cap" in said
    assert "LongRoPE" not in said
    _, cache = model.run_with_cache(model.tokenizer.encode(PROMPT))
    q = cache["blocks.1.attn.hook_rot_q"][6, 3]
    k = cache["blocks.1.attn.hook_rot_k"][2, 3 // (cfg.n_heads // cfg.n_kv_heads)]
    assert abs(cache["blocks.1.attn.hook_attn_scores"][3, 6, 2]
               - 50 * np.tanh(float(q @ k) * 0.0625 / 50)) < 1e-4
    assert abs(float(q @ k) * 0.0625) > 1.0            # large enough for the cap to bend it


def test_the_score_sentence_of_a_gemma_27b_scale(gguf_client):
    """Gemma 2 / 3 27B: query_pre_attn_scalar is width / heads (4608 / 32 = 144), not the head
    width (128); the loader sets attn_scale so (46 or 62 blocks). The same tiny weights with that
    scale: the sentence names 144 and the cached scores use it."""
    from dataclasses import replace

    from app import create_app
    from pipeline.model import Model
    gemma, _ = gguf_client("gemma2_f32")
    model = Model(replace(gemma.config, attn_scale=144 ** -0.5, attn_softcap=0.0), gemma.params,
                  gemma.tokenizer)
    client = create_app({"MODEL": model, "TESTING": True, "PROBE_ENCODINGS": False,
                         "WARM_CACHES": False}).test_client()
    said = score_rule_said(text_of(client.get(url("/section/attention", prompt=PROMPT,
                                                  open="att-softmax"), headers=HX)))
    assert ("divided by √144 (times 0.0833): Gemma's query_pre_attn_scalar, the width over the "
            "heads (144), not the head width 256") in said and "tanh" not in said
    _, cache = model.run_with_cache(model.tokenizer.encode(PROMPT))
    q, k = cache["blocks.0.attn.hook_rot_q"][5, 0], cache["blocks.0.attn.hook_rot_k"][1, 0]
    assert abs(cache["blocks.0.attn.hook_attn_scores"][0, 5, 1] - float(q @ k) / 12) < 1e-4


def test_the_score_sentence_names_longropes_attention_factor(gguf_client):
    model, client = gguf_client("phi3_longrope_f32")
    page = text_of(client.get(url("/section/attention", prompt=PROMPT, att_head=0,
                                  open="att-softmax"), headers=HX))
    said = score_rule_said(page)
    a = model.config.rope_attn_factor
    assert f"come out of RoPE {a:.4f} times longer (LongRoPE's attention factor)" in said
    assert f"every score is {a * a:.4f} times what plain RoPE would give" in said
    assert "divided by √16 (times 0.2500)" in said and "tanh" not in said
    _, cache = model.run_with_cache(model.tokenizer.encode(PROMPT))
    np.testing.assert_allclose(np.linalg.norm(cache["blocks.0.attn.hook_rot_k"], axis=-1),
                               a * np.linalg.norm(cache["blocks.0.attn.hook_k"], axis=-1),
                               rtol=1e-5)


def test_the_score_sentence_says_phi4_minis_partial_rope(gguf_client, client):
    """Phi-4-mini's partial RoPE: only the first 12 of each head's 16 numbers are turned (75%)
    and lengthened by LongRoPE's attention factor; the cached keys show exactly that (the last 4
    as they came out of the projection). Austen turns whole heads: no such sentence."""
    model, phi4 = gguf_client("phi4mini_f32")
    said = score_rule_said(text_of(phi4.get(url("/section/attention", prompt=PROMPT, att_head=0,
                                                open="att-softmax"), headers=HX)))
    a = model.config.rope_attn_factor
    assert ("RoPE turns only the first 12 of each head's 16 query and key numbers (75% of the "
            "head: partial RoPE); the other 4 reach the dot product unturned") in said
    assert (f"The turned part comes out {a:.4f} times longer (LongRoPE's attention factor), so "
            f"its share of every score is {a * a:.4f} times what plain RoPE would give; the rest "
            "is not scaled.") in said
    assert "so every score is" not in said
    _, cache = model.run_with_cache(model.tokenizer.encode(PROMPT))
    k, rot_k = cache["blocks.0.attn.hook_k"], cache["blocks.0.attn.hook_rot_k"]
    np.testing.assert_array_equal(rot_k[..., 12:], k[..., 12:])
    np.testing.assert_allclose(np.linalg.norm(rot_k[..., :12], axis=-1),
                               a * np.linalg.norm(k[..., :12], axis=-1), rtol=1e-5)
    austen = score_rule_said(text_of(client.get(url("/section/attention", prompt=PROMPT,
                                                    open="att-softmax"), headers=HX)))
    assert "partial RoPE" not in austen
