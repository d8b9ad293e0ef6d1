"""The positions section: RoPE numbers equal the engine's, the sinusoid figure is the formula
for the chosen base, word order is computed by the engine; a GPT-2 model shows its learned
table; bad values are 4xx at their control."""
import re
import urllib.parse

import numpy as np
import pytest

from pipeline import load_model
from pipeline.positions import rope_relative_scores, sinusoidal_encoding, word_order_differences
from test_web_embeddings import array, figures
from web_support import HX, error_message, every_section, table_rows, text_of, url

PROMPT = "Elizabeth smiled at Mr. Darcy, and Mr. Darcy smiled back."


def part(page: str) -> str:
    return page.split('<section id="positions"', 1)[1].split("</section>", 1)[0]


def test_rope_numbers_are_the_engines(client, model):
    q = dict(prompt=PROMPT, pos_layer=2, pos_head=5, pos_q=9, pos_k=3)
    r = client.get(url("/", **q), headers=every_section())
    assert r.status_code == 200
    page = part(text_of(r))
    ids = model.tokenizer.encode(PROMPT)
    _, cache = model.run_with_cache(ids)
    assert (f'<strong id="rope-model-score">'
            f'{cache["blocks.2.attn.hook_attn_scores"][5, 9, 3]:.6f}</strong>') in page
    rotated = float(re.search(r"which gives\s+(-?\d+\.\d+)", page).group(1))
    assert abs(rotated - cache["blocks.2.attn.hook_attn_scores"][5, 9, 3]) < 2e-6
    qv, kv = cache["blocks.2.attn.hook_q"][9, 5], cache["blocks.2.attn.hook_k"][3, 5 // 4]
    for label in ("Same distance", "Other distances"):
        for row in table_rows(page, label):
            m, n, score = int(row[0]), int(row[1]), row[-1]
            assert score == f"{rope_relative_scores(qv, kv, model.inv_freq, [(m, n)])[0]:.6f}"
    same = table_rows(page, "Same distance")
    assert {int(r[0]) - int(r[1]) for r in same} == {6} and len(same) >= 4
    assert np.ptp([float(r[2]) for r in same]) < 1e-5    # equal up to float32 rounding
    pairs = table_rows(page, "Rotation of each pair")
    assert len(pairs) == model.config.head_dim // 2
    rot = cache["blocks.2.attn.hook_rot_q"][9, 5]
    assert pairs[3][4] == f"({rot[3]:.3f}, {rot[3 + 16]:.3f})"
    assert all(row[5] == row[6] for row in pairs)  # a rotation keeps each pair's length


def test_sinusoid_figure_is_the_formula_for_the_chosen_base(client, model):
    page = part(text_of(client.get(url("/", pos_base=500), headers=every_section())))
    fig = next(f for f in figures(page) if "Sine waves" in f["layout"]["title"]["text"])
    pe = sinusoidal_encoding(64, model.config.d_model, 500)
    sin, cos = (array(t["z"]) for t in fig["data"])          # drawn apart, not interleaved
    np.testing.assert_allclose(sin, pe[:, 0::2], atol=1e-3)
    np.testing.assert_allclose(cos, pe[:, 1::2], atol=1e-3)
    assert "Sine waves, base 500" == fig["layout"]["title"]["text"]
    assert "does not use these" in page


def test_heatmaps_keep_a_phones_width_for_their_plots(client, model):
    """At 390 px the angle heatmap's plot was 35 px wide (its colour bar beside it, its row
    labels whole tokens) and each half of the sine waves under 100 px (side by side): the
    colour bars lie under the plots, row labels are short, and sine and cosine are stacked,
    each the figure's whole width, on one scale."""
    long = "Elizabeth acknowledged the extraordinary circumstances."
    page = part(text_of(client.get(url("/", prompt=long), headers=every_section())))
    by_title = {f["layout"]["title"]["text"]: f for f in figures(page)}
    angle = by_title["Angle of each pair, ±180°"]
    sine = next(f for t, f in by_title.items() if t.startswith("Sine waves"))
    for bar in (angle["data"][0]["colorbar"], sine["layout"]["coloraxis"]["colorbar"]):
        assert bar["orientation"] == "h" and bar["yref"] == "container" and bar["y"] == 0
    assert angle["data"][0]["colorbar"]["ticksuffix"] == "°"
    ticks = angle["layout"]["yaxis"]["ticktext"]
    tokens = [model.tokenizer.decode([i]) for i in model.tokenizer.encode(long)]
    assert len(ticks) == len(tokens) and any(len(t) > 8 for t in tokens)
    for i, (tick, token) in enumerate(zip(ticks, tokens, strict=True)):
        shown = tick.split(": ", 1)[1]
        assert tick.startswith(f"{i}: ") and len(shown) <= 8
        cut = shown.rstrip("…")
        assert cut == token.replace(" ", "·")[:len(cut)]        # the token's start, spaces as ·
    lay = sine["layout"]
    assert "domain" not in lay["xaxis"] and "domain" not in lay["xaxis2"]     # the whole width
    top, bottom = lay["yaxis"]["domain"], lay["yaxis2"]["domain"]
    assert bottom[1] < top[0]                                 # stacked, not side by side
    assert lay["xaxis2"]["matches"] == "x" and lay["yaxis2"]["matches"] == "y"


def test_word_order_table_is_the_engines(client, model):
    a, b = "the man loved the woman.", "the woman loved the man."
    page = part(text_of(client.get(url("/", pos_a=a, pos_b=b), headers=every_section())))
    ta, tb = model.tokenizer.encode(a), model.tokenizer.encode(b)
    _, with_pos, la, _ = word_order_differences(model, ta, tb, True)
    _, without, _, _ = word_order_differences(model, ta, tb, False)
    rows = table_rows(page, "Word order differences")
    n = model.config.n_layers
    assert [w[0] for w in with_pos] == ["embeddings"] + [f"after block {i}" for i in range(n)]
    # the page counts the blocks a stream has been through, from 1 ("after 4 of 4 blocks")
    assert [r[0] for r in rows] == ["embeddings"] + [f"after {k} of {n} blocks"
                                                     for k in range(1, n + 1)]
    for row, w1, w0 in zip(rows, with_pos, without, strict=True):
        assert row[1] == ("0" if w1[1] == 0 else f"{w1[1]:.2e}")
        assert row[2] == ("0" if w0[1] == 0 else f"{w0[1]:.2e}")
    assert float(rows[1][2]) < 1e-5 < float(rows[1][1])     # block 0: blind only without
    nxt = table_rows(page, "Next token after the first order")
    p = np.exp(la - la.max())
    p /= p.sum()
    assert int(nxt[0][1]) == int(np.argmax(la)) and nxt[0][2] == f"{p.max():.3f}"


BAD = [
    ({"pos_base": "50"}, "pos_base", "between 100 and 100000"),
    ({"pos_base": "10050"}, "pos_base", "steps of 100"),
    ({"pos_base": "1e4"}, "pos_base", "whole number"),
    ({"pos_layer": "4"}, "pos_layer", "RoPE layer 4 does not exist: the model has 4"),
    ({"pos_head": "8"}, "pos_head", "each layer has 8"),
    ({"pos_q": "999"}, "pos_q", "does not exist"),
    ({"pos_q": "2", "pos_k": "5"}, "pos_k", "comes after the query token"),
    ({"pos_b": "the cat bites the man."}, "pos_b", "same tokens"),
    ({"pos_b": "the dog bites the man."}, "pos_b", "same order"),
    ({"pos_a": "the dog bites the man", "pos_b": "the man bites the dog"}, "pos_b",
     "nothing to compare"),
    ({"pos_a": ""}, "pos_a", "is empty"),
    ({"pos_a": "a " * 60, "pos_b": "a " * 60}, "pos_a", "keep it to 48"),
]


@pytest.mark.parametrize("query,name,message", BAD, ids=[f"{n}-{i}" for i, (_, n, _) in
                                                         enumerate(BAD)])
@pytest.mark.parametrize("path", ["/", "/section/positions"])
def test_bad_value_is_4xx_with_its_message(client, query, name, message, path):
    r = client.get(url(path, **query), headers=every_section())
    assert r.status_code in (400, 422)
    assert message in error_message(text_of(r), name)


def test_choices_round_trip_through_the_url(client):
    q = {"prompt": PROMPT, "pos_base": "2500", "pos_layer": "1", "pos_head": "3",
         "pos_q": "6", "pos_k": "2", "pos_a": "the man loved the woman.",
         "pos_b": "the woman loved the man."}
    r = client.get(url("/section/positions", **q), headers=every_section())
    assert r.status_code == 200
    pushed = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["HX-Push-Url"]).query)
    assert pushed == {k: [v] for k, v in q.items()}
    page = text_of(client.get(r.headers["HX-Push-Url"], headers=every_section()))
    assert 'value="6" selected>6:' in page and 'value="2500"' in page


def test_prompt_change_drops_the_token_choices(client):
    assert re.search(r'hx-params="not [^"]*pos_q,pos_k', text_of(client.get("/")))


@pytest.fixture(scope="module")
def gpt2_client():
    from app import create_app
    return create_app({"MODEL": load_model("tests/fixtures/models/gpt2"), "TESTING": True,
                       "PROBE_ENCODINGS": False}).test_client()


def test_a_gpt2_model_shows_its_learned_table(gpt2_client):
    r = gpt2_client.get("/section/positions", headers=HX)
    assert r.status_code == 200
    page = text_of(r)
    m = load_model("tests/fixtures/models/gpt2")
    table = next(f for f in figures(page) if "Learned position table" in
                 f["layout"]["title"]["text"])
    np.testing.assert_allclose(array(table["data"][0]["z"]), m.params["wpe"], atol=1e-4)
    assert "learned positions" in page and "RoPE on this prompt" not in page
    assert re.search(r"Word order differences", page)
    assert gpt2_client.get("/section/embeddings", headers=HX).status_code == 200


@pytest.mark.parametrize("fixture", ["llama_untied", "llama_mqa", "gpt2"])
def test_both_sections_work_on_other_checkpoints(fixture):
    """llama_untied has embedding rows that no token names (a padded vocabulary), llama_mqa a
    single key/value head, gpt2 learned positions: each renders, with its own numbers."""
    from app import create_app
    m = load_model(f"tests/fixtures/models/{fixture}")
    client = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False}).test_client()
    last = (m.config.n_layers - 1, m.config.n_heads - 1)
    for path in ("/section/embeddings", "/section/positions",
                 f"/section/positions?pos_layer={last[0]}&pos_head={last[1]}"):
        r = client.get(path + ("&" if "?" in path else "?") + "prompt=the man and the dog",
                       headers=HX)
        assert r.status_code == 200, (path, error_message(text_of(r), "prompt"))
    assert f"{m.config.vocab_size:,} tokens" in text_of(client.get(
        "/section/embeddings?prompt=the", headers=HX))


def test_positions_disclosures_open_from_the_url(client):
    closed = part(text_of(client.get(url("/"), headers=every_section())))
    assert '<details class="deeper" id="deeper-pos-rope" data-deeper="pos-rope">' in closed
    page = part(text_of(client.get(url("/", open="pos-rope,pos-order"), headers=every_section())))
    for d in ("pos-rope", "pos-order"):
        assert f'<details class="deeper" id="deeper-{d}" data-deeper="{d}" open>' in page


def test_the_core_states_the_word_order_result_measured(client, model):
    """The core's sentence (the table in its disclosure closed): the two orders' difference after
    block 1 of N without and with positions and after block 2 without, the engine's numbers,
    and what they mean only when they say it (blind: below 1e-4)."""
    a, b = "the man loved the woman.", "the woman loved the man."
    page = text_of(client.get(url("/section/positions", pos_a=a, pos_b=b), headers=HX))
    ta, tb = model.tokenizer.encode(a), model.tokenizer.encode(b)
    _, with_pos, _, _ = word_order_differences(model, ta, tb, True)
    _, without, _, _ = word_order_differences(model, ta, tb, False)
    n = model.config.n_layers
    sci = lambda v: "0" if v == 0 else f"{v:.2e}"      # noqa: E731
    from web_support import reading_text  # without glossary definitions
    said = reading_text(re.search(r'<p id="pos-headline">(.*?)</p>', page, re.S).group(1)).strip()
    assert (f"after block 1 of {n} differs between the two orders by {sci(without[1][1])} "
            f"without positions and {sci(with_pos[1][1])} with them; after block 2 of {n}, by "
            f"{sci(without[2][1])} without positions") in said
    assert without[1][1] < 1e-4 <= without[2][1]           # measured, not assumed
    assert said.endswith("without positions the first block is blind to order (float32 "
                         "rounding only), the second is not.")
    assert page.index('id="pos-headline"') < page.index('id="deeper-pos-order"')


@pytest.fixture(scope="module")
def gguf_apps(tmp_path_factory):
    """Apps on tiny GGUF checkpoints (tests/gguf_support.py) with each RoPE scaling the engine
    runs: Llama 3.1's, Gemma 3's linear (two bases), Phi-3's LongRoPE, and Phi-4-mini's partial
    RoPE (with LongRoPE)."""
    import json
    import os

    from app import create_app
    from gguf_support import TESTS_DIR, write_checkpoint
    with open(os.path.join(TESTS_DIR, "fixtures", "gguf_reference.json"), encoding="utf-8") as f:
        seeds = {n: r["seed"] for n, r in json.load(f)["tiny"].items()}
    directory = tmp_path_factory.mktemp("gguf")
    out = {}
    for name in ("llama3_f32", "gemma3_linear_f32", "phi3_longrope_f32", "phi4mini_f32"):
        m = load_model(write_checkpoint(str(directory / f"{name}.gguf"), name, seeds[name]))
        out[name] = m, create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                                   "WARM_CACHES": False}).test_client()
    return out


def scaling_said(page: str) -> str:
    from web_support import reading_text
    m = re.search(r'<p id="pos-rope-scaling">(.*?)</p>', page, re.S)
    assert m, "no scaling sentence"
    return " ".join(reading_text(m.group(1)).split())


def wavelengths_drawn(page: str) -> np.ndarray:
    fig = next(f for f in figures(page)
               if f["layout"]["title"]["text"] == "How fast each pair turns")
    return array(fig["data"][0]["y"]).astype(np.float64)


def test_austen_says_it_runs_without_rope_scaling(client, model):
    page = part(text_of(client.get(url("/"), headers=every_section())))
    assert scaling_said(page) == (f"No RoPE scaling: these are base "
                                  f"{model.config.rope_theta:,.0f}'s own frequencies.")
    np.testing.assert_allclose(wavelengths_drawn(page), 2 * np.pi / model.inv_freq, rtol=1e-6)


@pytest.mark.parametrize("name,said", [
    ("llama3_f32", "These are scaled frequencies: Llama 3.1's RoPE scaling (rope_type llama3) "
                   "divides each pair's frequency by 1.00 (the fast pairs) up to 8.00 (the slow "
                   "ones), interpolating between, so the slow pairs turn that much slower than "
                   "base 500,000 alone would make them."),
    ("gemma3_linear_f32", "These are scaled frequencies: linear RoPE scaling (factor 8) divides "
                          "every pair's frequency by 8 in the global layers (every 6th: full "
                          "attention), so they turn 8 times slower than base 1,000,000 alone "
                          "would make them. The other layers (sliding window, all but every 6th) "
                          "turn with base 10,000, unscaled: pair 0 once every 6.3 positions, the "
                          "last once every"),
    ("phi3_longrope_f32", "These are scaled frequencies: Phi-3's LongRoPE divides each pair's "
                          "frequency by its own factor, here 1.00 to 16.00: the long factors, "
                          "because the context this engine offers (64 positions) is longer than "
                          "the original 16 (llama.cpp chooses by the context's size; transformers "
                          "by the sequence's, so it uses the short ones, 1.00 to 2.00, for a "
                          "sequence of at most 16 tokens). RoPE's cos and sin are also multiplied "
                          "by 1.2247, the attention factor: the rotated queries and keys come out "
                          "that much longer."),
])
def test_the_frequencies_shown_are_the_scaled_ones_the_model_runs(gguf_apps, name, said):
    """The page draws 2 pi / the engine's own (scaled) frequencies, says which scaling made them
    and with what numbers (the divisors: the base's frequencies over the model's)."""
    model, client = gguf_apps[name]
    page = part(text_of(client.get(url("/section/positions", prompt="It is a truth"),
                                   headers=HX)))
    assert scaling_said(page).startswith(said)
    drawn = wavelengths_drawn(page)
    np.testing.assert_allclose(drawn, 2 * np.pi / model.inv_freq, rtol=1e-6)
    from pipeline.model import rope_frequencies
    base = 2 * np.pi / rope_frequencies(model.config.rotary_dim(), model.config.rope_theta)
    assert not np.allclose(drawn, base, rtol=1e-3)        # scaled, not the base's own
    fastest = re.search(r"Pair 0 turns once every ([\d.,]+)\s+positions", page).group(1)
    assert fastest == f"{drawn[0]:.1f}"


@pytest.mark.parametrize("name,layer", [("gemma3_linear_f32", 0), ("gemma3_linear_f32", 5),
                                        ("phi3_longrope_f32", 1)])
def test_rope_on_the_prompt_uses_the_layers_own_frequencies(gguf_apps, name, layer):
    """Gemma 3's layer 0 turns with base 10000, layer 5 with the scaled 1e6; Phi-3's pairs come
    out LongRoPE's factor longer: the pair table, the rotated q and the scores are the model's."""
    model, client = gguf_apps[name]
    cfg = model.config
    prompt = "It is a truth universally acknowledged, that a single man"
    page = part(text_of(client.get(url("/section/positions", prompt=prompt, pos_layer=layer,
                                       pos_head=1, pos_q=9, pos_k=3, open="pos-rope"),
                                   headers=HX)))
    ids = model.tokenizer.encode(prompt)
    _, cache = model.run_with_cache(ids)
    inv = model.layer_inv_freq(layer)
    pairs = table_rows(page, "Rotation of each pair")
    assert [float(r[1]) for r in pairs] == [float(f"{f:.5f}") for f in inv]
    for r in pairs:
        assert abs(float(r[6]) - cfg.rope_attn_factor * float(r[5])) < 2e-4
    score = cache[f"blocks.{layer}.attn.hook_attn_scores"][1, 9, 3]
    assert f'<strong id="rope-model-score">{score:.6f}</strong>' in page
    rotated = float(re.search(r"which gives\s+(-?\d+\.\d+)", page).group(1))
    assert abs(rotated - score) < 2e-6 * max(1.0, abs(score))
    same = table_rows(page, "Same distance")
    real = [r for r in same if (int(r[0]), int(r[1])) == (9, 3)]
    assert real and abs(float(real[0][2]) - score) < 2e-5 * max(1.0, abs(score))
    if cfg.rope_theta_local:
        kind = "sliding-window" if cfg.local_layer(layer) else "global"
        assert f"layer {layer} is a {kind} layer" in " ".join(page.split())


def test_partial_rope_is_said_and_shown_as_the_model_runs_it(gguf_apps):
    """Phi-4-mini's partial RoPE (12 of each head's 16 dimensions here, as its 96 of 128): the
    page says the share, the formula's exponent is over 12, the pair table has the 6 pairs
    (j, j + 6) with the engine's frequencies and rotated numbers, and the 4 dimensions left out
    are said to pass through, measured on the cached query and key."""
    model, client = gguf_apps["phi4mini_f32"]
    cfg = model.config
    prompt = "It is a truth universally acknowledged, that a single man"
    page = part(text_of(client.get(url("/section/positions", prompt=prompt, pos_layer=1,
                                       pos_head=2, pos_q=9, pos_k=3, open="pos-rope"),
                                   headers=HX)))
    said = " ".join(re.sub(r"<[^>]+>", "", page).split())
    assert ("the first 12 of each head's 16 query and key numbers (75% of the head: partial "
            "RoPE) are cut into 6 pairs, the other 4 are never turned") in said
    assert "−2j/12 radians per" in said and "passes the last 4 through as they are" in said
    _, cache = model.run_with_cache(model.tokenizer.encode(prompt))
    rot = cache["blocks.1.attn.hook_rot_q"][9, 2]
    pairs = table_rows(page, "Rotation of each pair")
    assert [float(r[1]) for r in pairs] == [float(f"{f:.5f}") for f in model.inv_freq]
    assert len(pairs) == cfg.rotary_dim() // 2 == 6
    assert pairs[4][4] == f"({rot[4]:.3f}, {rot[4 + 6]:.3f})"
    passed = np.abs(rot[12:] - cache["blocks.1.attn.hook_q"][9, 2, 12:]).max()
    assert passed == 0.0
    assert ("Dimensions 12–15 of the head are not in any pair: RoPE leaves them as they are (in "
            "this query and key they change by at most 0).") in said
    drawn = wavelengths_drawn(page)
    np.testing.assert_allclose(drawn, 2 * np.pi / model.inv_freq, rtol=1e-6)
    assert len(drawn) == 6
    overview = text_of(client.get(url("/overview", prompt="It is a truth")))
    overview = " ".join(re.sub(r"<[^>]+>", "", overview).split())
    assert ("q and k turned by position inside attention (6 frequencies, turning the first 12 "
            "of each head's 16 dimensions)") in overview


def curve_drawn(page: str) -> tuple:
    fig = next(f for f in figures(page) if f["layout"]["title"]["text"] == "q·k by distance")
    return array(fig["data"][0]["x"]).astype(np.int64), array(fig["data"][0]["y"])


def test_the_distance_curve_is_the_formula_and_capped_for_long_contexts(model, monkeypatch):
    """Austen (256 positions): every distance. The same model with a context of 131,072 (as
    Phi-3.5's) or 8,192: every distance below 4,096, then log-spaced ones to the end; each drawn
    value is rope_relative_scores at its distance, and the long context computes no more
    distances than the 8,192 one."""
    from dataclasses import replace

    import web.sections.positions as section
    from app import create_app
    from pipeline.model import Model
    computed = []
    real = section.rope_relative_scores

    def counting(q, k, inv_freq, pairs, **kw):
        computed.append(len(pairs))
        return real(q, k, inv_freq, pairs, **kw)
    monkeypatch.setattr(section, "rope_relative_scores", counting)
    prompt = "Elizabeth smiled at Mr. Darcy."
    counts = {}
    for n_ctx in (model.config.n_ctx, 8192, 131072):
        m = Model(replace(model.config, n_ctx=n_ctx), model.params, model.tokenizer)
        client = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                             "WARM_CACHES": False}).test_client()
        computed.clear()
        page = part(text_of(client.get(url("/section/positions", prompt=prompt, pos_layer=1,
                                           pos_head=3, pos_q=6, pos_k=2, open="pos-rope"),
                                       headers=HX)))
        x, y = curve_drawn(page)
        counts[n_ctx] = computed[-1]                  # the curve's call comes last
        assert len(x) == len(y) == counts[n_ctx]
        ids = m.tokenizer.encode(prompt)
        _, cache = m.run_with_cache(ids)
        q, k = cache["blocks.1.attn.hook_q"][6, 3], cache["blocks.1.attn.hook_k"][2, 3 // 4]
        np.testing.assert_allclose(y, rope_relative_scores(q, k, m.inv_freq,
                                                           [(int(d), 0) for d in x]),
                                   rtol=1e-5, atol=1e-6)
        said = " ".join(re.search(r'<p id="pos-curve-range">(.*?)</p>', page, re.S)
                        .group(1).split())
        if n_ctx <= 4096:
            np.testing.assert_array_equal(x, np.arange(n_ctx))
            assert said.endswith(f"every distance the context allows, 0 to {n_ctx - 1:,}.")
        else:
            assert x[-1] == n_ctx - 1 and 4 in x
            np.testing.assert_array_equal(x[:4096], np.arange(4096))
            assert np.all(np.diff(x) > 0) and len(x) <= 4096 + 512 + 1
            assert (f"every distance from 0 to 4,095, then at log-spaced distances up to "
                    f"{n_ctx - 1:,}: {len(x):,} of the {n_ctx:,} distances the context allows, "
                    "each computed with the model's own frequencies.") in said
    assert counts[131072] <= counts[8192] < 8192


def curve_axis_title(page: str) -> str:
    fig = next(f for f in figures(page) if f["layout"]["title"]["text"] == "q·k by distance")
    return fig["layout"]["yaxis"]["title"]["text"]


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory):
    import json
    import os

    from gguf_support import TESTS_DIR, write_checkpoint
    with open(os.path.join(TESTS_DIR, "fixtures", "gguf_reference.json"), encoding="utf-8") as f:
        seed = json.load(f)["tiny"]["gemma2_f32"]["seed"]
    path = tmp_path_factory.mktemp("gemma2") / "gemma2_f32.gguf"
    return load_model(write_checkpoint(str(path), "gemma2_f32", seed))


def curve_page(m, prompt="It is a truth universally acknowledged"):
    from app import create_app
    client = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                         "WARM_CACHES": False}).test_client()
    return part(text_of(client.get(url("/section/positions", prompt=prompt, pos_layer=1,
                                       pos_head=1, pos_q=5, pos_k=2, open="pos-rope"),
                                   headers=HX)))


def test_the_distance_curves_axis_says_austens_scale(client, model):
    page = part(text_of(client.get(url("/section/positions", prompt=PROMPT, pos_q=6, pos_k=2,
                                       open="pos-rope"), headers=HX)))
    hd = model.config.head_dim
    assert model.config.score_scale() == hd ** -0.5
    assert curve_axis_title(page) == f"score q·k / √{hd} ({hd}: the head width)"


def test_the_distance_curves_axis_says_gemmas_scale_and_cap(gemma2):
    """Gemma 2 (the tiny gemma2_f32 file): q·k over √query_pre_attn_scalar (256, its head width,
    as Gemma 2 2B / 9B), soft-capped at 50; the drawn values are that formula. The 27B's scalar
    (width / heads, not the head width) is named with its own number."""
    from dataclasses import replace

    from pipeline.model import Model
    cfg = gemma2.config
    assert (cfg.attn_softcap, cfg.score_scale()) == (50.0, 256 ** -0.5)
    page = curve_page(gemma2)
    assert curve_axis_title(page) == "score 50·tanh(q·k / √256 / 50) (256: query_pre_attn_scalar)"
    x, y = curve_drawn(page)
    _, cache = gemma2.run_with_cache(gemma2.tokenizer.encode("It is a truth universally "
                                                             "acknowledged"))
    kv_head = 1 // (cfg.n_heads // cfg.n_kv_heads)
    q, k = cache["blocks.1.attn.hook_q"][5, 1], cache["blocks.1.attn.hook_k"][2, kv_head]
    expected = rope_relative_scores(q, k, gemma2.layer_inv_freq(1), [(int(d), 0) for d in x],
                                    scale=256 ** -0.5, cap=50.0)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(y).max() < 50
    width_over_heads = cfg.d_model // cfg.n_heads
    m = Model(replace(cfg, attn_scale=width_over_heads ** -0.5), gemma2.params, gemma2.tokenizer)
    assert curve_axis_title(curve_page(m)) == (
        f"score 50·tanh(q·k / √{width_over_heads} / 50) "
        f"({width_over_heads}: query_pre_attn_scalar)")
