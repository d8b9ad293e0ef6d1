"""The transformer-block section shows the model's own shapes, tensors, parameter counts and
logit lens: every number checked against the engine or the formula."""
import html
import json
import re

import numpy as np
import pytest

from engine_support import get_model
from pipeline.model import softmax
from pipeline.published import PUBLISHED
from pipeline.sizes import counted_from_arrays, parameter_counts
from web.model_state.forward import prompt_run
from web.sections.block import parts_of
from web_support import HX, error_message, every_section, text_of, url, without_definitions

PROMPT = "Elizabeth could not help smiling at Mr. Darcy, and"


def block(client, **params):
    r = client.get(url("/section/block", prompt=PROMPT, **params), headers=HX)
    return r, text_of(r)


def diagram_shapes(page) -> dict:
    """blk_part -> the shape written on its button."""
    return {k: [int(x) for x in s.split(",")] for k, s in re.findall(
        r'hx-vals=\'\{"blk_part": "(\w+)"\}\'>[^<]*<span class="shape">\[([\d, ]+)\]</span>',
        page)}


def test_diagram_shapes_are_the_cache_shapes(client, app):
    lm = app.extensions["explainer"].default_model
    r, page = block(client, blk_layer="2")
    run = prompt_run(lm, PROMPT)
    shapes = diagram_shapes(page)
    parts = parts_of(lm.model.config)
    assert list(shapes) == [p.key for p in parts]
    for p in parts:
        assert shapes[p.key] == list(run.cache[p.hook.format(i=2)].shape), p.key
    T = len(run.ids)
    assert shapes["q"] == [T, 8, 32] and shapes["k"] == [T, 2, 32]
    assert shapes["pattern"] == [8, T, T] and shapes["ffn_hidden"] == [T, 768]
    assert "Grouped-query attention:" in page


@pytest.mark.parametrize("part,head,slicer", [
    ("pattern", 3, lambda a: a[3]),
    ("q", 6, lambda a: a[:, 6]),
    ("k", 5, lambda a: a[:, 1]),                       # query head 5 uses kv head 5 // 4 = 1
    ("ffn_hidden", 0, lambda a: a),
    ("resid_post", 0, lambda a: a),
])
def test_a_clicked_part_shows_that_tensor(client, app, part, head, slicer):
    lm = app.extensions["explainer"].default_model
    r, page = block(client, blk_part=part, blk_layer="1", blk_head=str(head))
    assert r.status_code == 200
    hook = next(p.hook for p in parts_of(lm.model.config) if p.key == part).format(i=1)
    full = prompt_run(lm, PROMPT).cache[hook]
    shown = slicer(full)
    finite = shown[np.isfinite(shown)]
    assert f"<code>{hook}</code>" in page
    assert f'<strong class="blk-shape">[{", ".join(map(str, full.shape))}]</strong>' in page
    assert f'<strong id="blk-mean">{finite.mean():.4f}</strong>' in page
    assert f'<strong id="blk-max">{finite.max():.4f}</strong>' in page
    assert 'aria-pressed="true"' in page and page.count('aria-pressed="true"') == 1
    if part == "k":
        assert "key/value head 1 (used by query head 5)" in page


def test_parameter_table_counts_the_arrays_and_the_formula(client, model):
    _, page = block(client)
    arrays, formula = counted_from_arrays(model), parameter_counts(model.config)
    rows = {r[0]: r for r in table_rows_th(page, "Parameter counts of this model")}
    assert rows["token embedding"][2:] == [f"{arrays.embedding:,}", f"{formula.embedding:,} ✓"]
    assert rows["per block: attention k"][2] == f"{arrays.attn_k:,}"
    assert rows["total (4 blocks)"][2] == f"{model.n_params():,}" == "4,065,536"


def test_published_table_applies_the_formula_to_each_config(client):
    _, page = block(client)
    rows = {r[0]: r for r in table_rows_th(page, "Parameter counts of published models")}
    for p in PUBLISHED:
        total = parameter_counts(p.config).total
        assert rows[p.name][7] == f"{total:,}"
        assert rows[p.name][8] == f"{p.reported_params:,} ✓"
        assert rows[p.name][9] == p.nominal


def table_rows_th(page, label):
    """Rows of a table whose first cell is a <th scope=row>."""
    m = re.search(r'<table[^>]*aria-label="%s"[^>]*>(.*?)</table>' % re.escape(label),
                  without_definitions(page), re.S)   # a glossary term's words, as they read
    body = m.group(1).split("<tbody>", 1)[1]

    return [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
             for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr, re.S)]
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


@pytest.mark.parametrize("pos", [None, 3])
def test_logit_lens_guesses_are_the_model_cut_after_k_blocks(client, model, pos):
    ids = model.tokenizer.encode_ordinary(PROMPT)
    params = {} if pos is None else {"blk_pos": str(pos)}
    _, page = block(client, **params)
    at = len(ids) - 1 if pos is None else pos
    rows = table_rows_th(page, "Logit lens: top guesses after each block")
    assert len(rows) == model.config.n_layers + 1
    for k, row in enumerate(rows):
        p = softmax(model.forward(ids, n_layers=k)[at])
        top = np.argsort(-p)[:5]
        shown_ids = [int(re.search(r"#(\d+)", cell).group(1)) for cell in row[1:6]]
        assert shown_ids == [int(i) for i in top], k
        assert row[1].endswith(f"{100 * p[top[0]]:.1f}%")


def test_the_lens_is_computed_once_per_prompt_and_position(client, model):
    """Another block, part or head shows the same logit lens without computing it again (it
    depends on the prompt and the position only); another position computes its own, the
    model cut after k blocks (the test above)."""
    from web.sections import block as section
    ids = model.tokenizer.encode_ordinary(PROMPT)
    name = "Logit lens: top guesses after each block"
    _, page = block(client, blk_pos="2")
    first = table_rows_th(page, name)
    computed = section._lens.computed
    for params in (dict(blk_layer="1"), dict(blk_part="v", blk_head="1"), dict(blk_part="z")):
        _, page = block(client, blk_pos="2", **params)
        assert table_rows_th(page, name) == first
    assert section._lens.computed == computed
    _, page = block(client, blk_pos="1")
    assert section._lens.computed == computed + 1
    top = int(np.argmax(model.forward(ids, n_layers=model.config.n_layers)[1]))
    assert int(re.search(r"#(\d+)", table_rows_th(page, name)[-1][1]).group(1)) == top


def test_tied_read_out_of_the_embeddings_is_explained_when_it_guesses_the_input(client, model):
    ids = model.tokenizer.encode_ordinary(PROMPT)
    _, page = block(client)
    rows = table_rows_th(page, "Logit lens: top guesses after each block")
    first = int(re.search(r"#(\d+)", rows[0][1]).group(1))
    said = 'id="blk-lens-tied"' in page
    assert said == (model.config.tied_embeddings and first == ids[-1])
    assert said                                     # austen is tied and its lens shows it


def test_untied_model_does_not_claim_the_tied_read_out():
    from app import create_app
    m = get_model("llama_untied")
    c = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                    "WARM_CACHES": False}).test_client()
    page = text_of(c.get(url("/section/block", prompt="the cat sat"), headers=HX))
    assert 'id="blk-lens-tied"' not in page


def test_block_disclosures_open_from_the_url(client):
    _, closed = block(client)
    assert '<details class="deeper" id="deeper-blk-params" data-deeper="blk-params">' in closed
    _, page = block(client, open="blk-params,blk-lens")
    for d in ("blk-params", "blk-lens"):
        assert f'<details class="deeper" id="deeper-{d}" data-deeper="{d}" open>' in page


@pytest.mark.parametrize("params,name,message,status", [
    ({"blk_layer": "4"}, "blk_layer", "Block 4 does not exist: this model has 4 blocks", 422),
    ({"blk_layer": "-1"}, "blk_layer", "Block must be between 0 and 999", 422),
    ({"blk_layer": "two"}, "blk_layer", "Block must be a whole number", 400),
    ({"blk_head": "8"}, "blk_head", "Head 8 does not exist: this model has 8 heads", 422),
    # 18 parts: the message names the first three and the last, with the count
    ({"blk_part": "wq"}, "blk_part", "Part of the block must be one of embed, resid_pre, ln1, "
     "…, logits (18 in all); got 'wq'.", 422),
    # a part of other models' blocks (learned positions), not of this one's: refused too
    ({"blk_part": "pos_embed"}, "blk_part", "Part of the block must be one of embed, resid_pre, "
     "ln1, …, logits (18 in all); got 'pos_embed'.", 422),
    ({"blk_part": "x" * 21}, "blk_part", "is 21 characters long; the limit is 20", 422),
    ({"blk_pos": "99"}, "blk_pos", "Position 99 does not exist: this prompt has", 422),
])
def test_bad_values_get_a_message_and_a_4xx(client, params, name, message, status):
    r, page = block(client, **params)
    assert r.status_code == status
    assert message in error_message(page, name)


def test_state_round_trips_through_the_url(client):
    r, _ = block(client, blk_layer="3", blk_part="pattern", blk_head="2", blk_pos="4")
    pushed = r.headers["HX-Push-Url"]
    for pair in ("blk_layer=3", "blk_part=pattern", "blk_head=2", "blk_pos=4"):
        assert pair in pushed
    page = text_of(client.get(pushed, headers=every_section()))
    assert '<option value="3" selected>3</option>' in page
    assert "<code>blocks.3.attn.hook_pattern</code>" in page
    # the defaults (block 0, q, head 0, last token) are left out of the address
    r, _ = block(client)
    assert "blk_" not in r.headers["HX-Push-Url"]


@pytest.mark.parametrize("fixture", ["gpt2", "llama_mqa", "llama_untied"])
def test_other_model_families_render(fixture):
    from app import create_app
    m = get_model(fixture)
    c = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                    "WARM_CACHES": False}).test_client()
    r = c.get(url("/section/block", prompt="the cat sat", blk_part="pos_embed"
                  if m.config.positions == "learned" else "ffn_hidden"), headers=HX)
    page = text_of(r)
    assert r.status_code == 200, error_message(page, "blk_part")
    shapes = diagram_shapes(page)
    run = prompt_run(c.application.extensions["explainer"].default_model, "the cat sat")
    for p in parts_of(m.config):
        assert shapes[p.key] == list(run.cache[p.hook.format(i=0)].shape)
    rows = {r[0]: r for r in table_rows_th(page, "Parameter counts of this model")}
    total = [v for k, v in rows.items() if k.startswith("total")][0]
    assert total[2] == f"{m.n_params():,}" and total[3] == f"{m.n_params():,} ✓"
    if fixture == "gpt2":
        assert "LayerNorm 1" in page and "GELU" in page and "position embeddings" in page
    if fixture == "llama_mqa":
        assert "Multi-query attention" in page
    if fixture == "llama_untied":
        assert rows["unembedding"][2] == f"{m.config.vocab_size * m.config.d_model:,}"
    r = c.get(url("/section/logits", prompt="the cat sat"), headers=HX)
    assert r.status_code == 200
    assert "Jane Austen" not in text_of(r)           # nothing claimed of another checkpoint


# --- SmolLM2-135M-Instruct (30 blocks, 49,152 tokens): skipped when its package is absent ---

@pytest.fixture()
def smol(smol_app):
    return smol_app.test_client(), smol_app.extensions["explainer"].models["smollm2"]


def lens_reference(model, prompt, pos=None):
    """(ranks, probabilities) of the model's final guess at every read-out, from the model cut
    after k blocks (model.forward(ids, n_layers=k)) in float64: rank = 1 + the number of logits
    strictly above the guess's, probability = a float64 softmax."""
    ids = model.tokenizer.encode_ordinary(prompt)
    at = len(ids) - 1 if pos is None else pos
    logits = np.stack([model.forward(ids, n_layers=k)[at] for k in
                       range(model.config.n_layers + 1)]).astype(np.float64)   # [N + 1, V]
    final = int(np.argmax(logits[-1]))
    ranks = [int((row > row[final]).sum()) + 1 for row in logits]
    z = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(z[:, final]) / np.exp(z).sum(axis=1)
    return final, ranks, probs


def first_for_good(ranks, within):
    """The first read-out from which the rank stays within `within` to the end."""
    k = len(ranks)
    while k > 0 and ranks[k - 1] <= within:
        k -= 1
    return k


def lens_page(client, model_name=None, **params):
    extra = {"model": model_name} if model_name else {}
    return text_of(client.get(url("/section/block", open="blk-lens", **extra, **params),
                              headers=HX))


def check_lens_against_reference(page, model, prompt, pos=None):
    import json
    final, ranks, probs = lens_reference(model, prompt, pos)
    rows = table_rows_th(page, "Logit lens: top guesses after each block")
    N = model.config.n_layers
    assert len(rows) == N + 1
    assert rows[0][0] == "embeddings only (0 blocks)"
    assert rows[-1][0] == f"after {N} of {N} blocks = the model's output"
    assert [r[-1].rsplit(", ", 1)[0] for r in rows] == [f"rank {r:,}" for r in ranks]
    # the probability as computed, never a false 0
    for row, p in zip(rows, probs, strict=True):
        shown = row[-1].rsplit(", ", 1)[1]
        assert shown != "0%" and shown.endswith("%")
        assert float(shown[:-1]) == pytest.approx(100 * p, rel=0.06), (shown, p)
    lens = [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)][-1]
    prob_line, rank_line = lens["data"]
    np.testing.assert_allclose(prob_line["y"], probs, rtol=1e-4)
    assert rank_line["y"] == ranks
    return final, ranks, probs


def test_austen_lens_ranks_are_the_float64_logit_ranks(client, model):
    page = lens_page(client, prompt=PROMPT)
    check_lens_against_reference(page, model, PROMPT)
    page = lens_page(client, prompt=PROMPT, blk_pos="3")
    check_lens_against_reference(page, model, PROMPT, pos=3)


def test_lens_headline_in_the_core_is_the_pipelines(client, model):
    """The core says where the next token becomes the top guess, from the same read-outs, counted
    "block k of N"; inside the next-token question's gate."""
    page = text_of(client.get(url("/section/block", prompt=PROMPT), headers=HX))  # lens closed
    final, ranks, _ = lens_reference(model, PROMPT)
    N = model.config.n_layers
    headline = re.search(r'<p id="blk-headline">(.*?)</p>', page, re.S).group(1)
    from web_support import reading_text  # without glossary definitions
    said = reading_text(headline)
    top = first_for_good(ranks, 1)
    if top == N:
        assert f"becomes the top guess only after block {N} of {N}, the last" in said
    else:
        assert f"becomes the top guess for good after block {top} of {N}" in said
    assert model.tokenizer.decode([final]).replace(" ", "·") in said
    gate = page[:page.index('<p id="blk-headline">')].rsplit('<div class="answer-gate gated"', 1)
    assert len(gate) == 2 and 'data-answer-of="next-token"' in gate[1]
    assert "</div>" not in gate[1].split('class="answer-gate-body">', 1)[1]


def test_smollm2_lens_shows_where_paris_surfaces(smol):
    client, lm = smol
    prompt = "The capital of France is"
    page = lens_page(client, "smollm2", prompt=prompt)
    final, ranks, probs = check_lens_against_reference(page, lm.model, prompt)
    paris = lm.tokenizer.encode_ordinary(" Paris")[0]
    assert final == paris
    rows = table_rows_th(page, "Logit lens: top guesses after each block")
    assert rows[-1][1] == f"·Paris #{paris} {100 * probs[-1]:.1f}%"
    assert 0.76 < probs[-1] < 0.78                       # transformers' 0.773 (FACTS)
    # float32 probabilities underflow to 0 after the embeddings alone: ranking them tied ~3,000
    # tokens at 0 (rank 1,497); the logits rank ·Paris 4,316th, with p ~ 5e-51
    assert ranks[0] == 4316 and probs[0] < 1e-45
    lens = [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)][-1]
    # 31 read-outs: the axis names the embeddings, every fifth block and the last, level
    assert lens["layout"]["xaxis2"]["ticktext"] == ["emb.", "5", "10", "15", "20", "25", "30"]
    said = re.sub(r"\s+", " ", page)
    assert "becomes the top guess only after block 30 of 30, the last" in said
    assert "block 29" not in html.unescape(re.sub(r"<[^>]+>", "", said))


def norms_figure_of(page: str) -> dict:
    import html as html_
    import json
    import re
    figs = [json.loads(html_.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]
    return next(f for f in figs if "Residual-stream norm" in f["layout"]["title"]["text"])


def test_smollm2_residual_norms_are_on_a_log_colour_scale(smol):
    """SmolLM2's first token reaches a norm of ~20,000, the others stay under ~800: on a linear
    colour scale every row but the first was white. On log10 the other tokens span most of the
    colours; the colour bar, the note and the hover give the norms in their own units."""
    from test_web_embeddings import array
    client, lm = smol
    fig = norms_figure_of(text_of(client.get(url("/section/block", model="smollm2"), headers=HX)))
    trace = fig["data"][0]
    z = array(trace["z"]).astype(np.float64)
    norms = np.array([[cell[1] for cell in row] for row in trace["customdata"]])
    np.testing.assert_allclose(z, np.log10(norms), atol=1e-3)          # z is log10 of the norm
    assert norms[0].max() > 10 * norms[1:].max()                      # the outlier is there
    span = trace["zmax"] - trace["zmin"]
    assert (z[1:].max() - z[1:].min()) / span >= 0.5                  # the others: half the scale
    assert trace["zmin"] - 1e-5 <= z.min() and z.max() <= trace["zmax"] + 1e-5
    # the colour bar is labelled in norms (10, 100, 1k, 10k) at their log10 places
    bar = trace["colorbar"]
    assert bar["ticktext"] == ["10", "100", "1k", "10k"]
    assert bar["tickvals"] == pytest.approx([1, 2, 3, 4])
    # no title on the bar (it was drawn on it): the figure's title names the colour, its scale
    # and the real range; the hover gives each norm
    assert not bar.get("title", {}).get("text")
    title = fig["layout"]["title"]["text"]
    assert f"colour: the norm, log scale, {norms.min():.2g} to {norms.max():,.0f})" in title
    assert "norm %{customdata[1]:,.3f}" in trace["hovertemplate"]
