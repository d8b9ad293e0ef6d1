"""The embeddings section shows the model's own table: the token vectors, the PCA map, the
neighbours and the analogies equal the pipeline's values; bad words are 422 at their field."""
import base64
import html
import json
import re
import urllib.parse

import numpy as np
import pytest

from pipeline.embedding_space import analogy, cosine_neighbours, far_rows, pca_2d, unit_rows
from web.core.cache import model_key
from web.sections import embeddings as section
from web_support import HX, error_message, table_rows, text_of, url

PROMPT = "Elizabeth smiled at Mr. Darcy, and Mr. Darcy smiled back."


def figures(page: str) -> list:
    return [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]


def array(value) -> np.ndarray:
    """A Plotly JSON array: a list, or a typed array {"dtype", "bdata" (base64), "shape"}."""
    if isinstance(value, dict):
        a = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return a.reshape([int(n) for n in str(shape).split(",")]) if shape else a
    return np.asarray(value)


def prompt_of(tokenizer, n_tokens: int) -> str:
    """A prompt of about n_tokens tokens (Austen's first sentence, repeated)."""
    text = ("It is a truth universally acknowledged, that a single man in possession of a "
            "good fortune, must be in want of a wife. ") * 4
    return tokenizer.decode(tokenizer.encode(text)[:n_tokens])


def embeddings_part(page: str) -> str:
    return page.split('<section id="embeddings"', 1)[1].split("</section>", 1)[0]


def test_neighbour_table_is_the_pipelines(client, model):
    page = embeddings_part(text_of(client.get(url("/", prompt=PROMPT, emb_k=3))))
    ids = model.tokenizer.encode(PROMPT)
    distinct = list(dict.fromkeys(ids))
    rows = table_rows(page, "Nearest neighbours")
    assert [int(r[1]) for r in rows] == distinct
    unit = unit_rows(model.params["wte"])
    for row, i in zip(rows, distinct, strict=True):
        nids, sims = cosine_neighbours(unit, unit[i], 3, exclude=(i,))
        shown = re.findall(r"(\d+) (-?\d\.\d{3})", row[2])
        assert [(int(a), b) for a, b in shown] == [(int(n), f"{s:.3f}") for n, s in
                                                    zip(nids, sims, strict=True)]


def test_a_new_prompt_computes_neighbours_only_for_tokens_not_seen_before(client, model):
    """Neighbours are per token: a second prompt sharing tokens with the first computes only
    its new ones, and its table is still the pipeline's for every token."""
    first, second = "Elizabeth walked to Meryton", "Elizabeth walked to the ball at Netherfield"
    client.get(url("/", prompt=first))
    kept = {i for i in model.tokenizer.encode(second)
            if (model_key(model), i, section.EMB_K.max) in section.NEIGHBOURS}
    assert set(model.tokenizer.encode(first)) & set(model.tokenizer.encode(second)) <= kept
    before = section.NEIGHBOURS.computed
    page = embeddings_part(text_of(client.get(url("/", prompt=second, emb_k=3))))
    new = set(model.tokenizer.encode(second)) - kept
    assert new and section.NEIGHBOURS.computed - before == len(new)
    unit = unit_rows(model.params["wte"])
    for row in table_rows(page, "Nearest neighbours"):
        i = int(row[1])
        nids, sims = cosine_neighbours(unit, unit[i], 3, exclude=(i,))
        shown = re.findall(r"(\d+) (-?\d\.\d{3})", row[2])
        assert [(int(a), b) for a, b in shown] == [(int(n), f"{s:.3f}") for n, s in
                                                    zip(nids, sims, strict=True)]


def test_cosine_matrix_raw_rows_and_map_are_the_models(client, model):
    page = embeddings_part(text_of(client.get(url("/", prompt=PROMPT))))
    cos, vocab, heat = figures(page)[:3]
    ids = model.tokenizer.encode(PROMPT)
    W = model.params["wte"]
    unit = W[ids] / np.linalg.norm(W[ids], axis=1, keepdims=True)
    np.testing.assert_allclose(array(cos["data"][0]["z"]), unit @ unit.T, atol=1e-5)
    np.testing.assert_allclose(array(heat["data"][0]["z"]), W[ids], atol=1e-4)
    assert len(heat["layout"]["yaxis"]["ticktext"]) == len(ids)   # repeated tokens keep rows
    assert len(cos["layout"]["yaxis"]["ticktext"]) == len(ids)
    coords, _, explained = pca_2d(W)
    far, _ = far_rows(W)
    dots, marked, highlight = vocab["data"]
    assert len(array(dots["x"])) + len(array(marked["x"])) == model.config.vocab_size
    assert [c[1] for c in marked["customdata"]] == far.tolist()
    assert f"({len(far):,})" in marked["name"]
    assert [c[0] for c in highlight["customdata"]] == list(dict.fromkeys(ids))
    np.testing.assert_allclose(array(highlight["x"]), coords[list(dict.fromkeys(ids)), 0],
                               atol=1e-3)
    assert f"{explained[0] * 100:.1f}%</strong> and" in page
    # the text says what the map shows: the long rows beyond its edge counted in the arrow's
    # note, the rest drawn as crosses inside it; together, every long row
    assert f"<strong>{len(far):,}</strong> rows are much longer" in page
    assert "long rows (×) …" in page
    inside = np.ones(len(far), dtype=bool)
    for k, axis in enumerate(("xaxis", "yaxis")):
        rng = vocab["layout"][axis].get("range")
        if rng:
            inside &= (coords[far, k] >= rng[0]) & (coords[far, k] <= rng[1])
    counted = sum(int(re.search(r"([\d,]+) long rows? \(×\)", a["text"]).group(1).replace(",", ""))
                  for a in vocab["layout"].get("annotations", []) if "long row" in a["text"])
    assert counted + int(inside.sum()) == len(far)


def test_far_rows_are_the_long_cluster_and_none_in_a_random_table(model):
    W = model.params["wte"]
    far, threshold = far_rows(W)
    norms = np.linalg.norm(W, axis=1)
    assert 100 < len(far) < 500                     # this model: the never-trained rows
    assert norms[far].min() > threshold > np.sort(norms)[-len(far) - 1]
    unit = W[far] / norms[far, None]
    assert (unit @ unit.T).mean() > 0.9             # one tight cluster
    rng = np.random.default_rng(0)
    assert len(far_rows(rng.normal(size=(2000, 64)).astype(np.float32))[0]) == 0


def test_prompt_labels_on_the_map_stand_clear(client, model):
    """On a phone's plot (the narrowest) no written label of the prompt's tokens covers another
    label or another of the prompt's dots, and the map shows the bulk of the vocabulary: the
    long rows lie beyond its left or right edge, counted in a note at that edge."""
    from web.figures.embeddings import LABEL_SPOTS, MAP_PLOT_PX
    page = embeddings_part(text_of(client.get(url("/", prompt=PROMPT))))
    vocab = figures(page)[1]
    highlight = vocab["data"][2]
    coords, _, _ = pca_2d(model.params["wte"])
    far, _ = far_rows(model.params["wte"])
    xlo, xhi = vocab["layout"]["xaxis"]["range"]
    # the long rows are off the map, and the note at the edge says how many
    assert ((coords[far, 0] < xlo) | (coords[far, 0] > xhi)).all()
    beyond = int(((coords[:, 0] < xlo) | (coords[:, 0] > xhi)).sum())
    notes = " ".join(a["text"] for a in vocab["layout"]["annotations"])
    assert f"{len(far):,} long rows (×)" in notes
    assert f"{beyond - len(far):,} tokens" in notes
    assert (xhi - xlo) < 0.75 * (coords[:, 0].max() - coords[:, 0].min())
    # the labels: every written one clear of the others and of every other dot of the prompt
    ylo, yhi = coords[:, 1].min(), coords[:, 1].max()
    ylo, yhi = ylo - 0.04 * (yhi - ylo), yhi + 0.04 * (yhi - ylo)
    xs, ys = array(highlight["x"]), array(highlight["y"])
    px = np.stack([(xs - xlo) / (xhi - xlo) * MAP_PLOT_PX[0],
                   (ys - ylo) / (yhi - ylo) * MAP_PLOT_PX[1]], 1)
    texts = [c[1] for c in highlight["customdata"]]
    spots = dict(LABEL_SPOTS)
    named = [i for i, t in enumerate(highlight["text"]) if t]
    assert 3 < len(named) < len(texts)             # some written, the crowded ones left out
    boxes = {}
    for i in named:
        x, y = px[i]
        left, right, bottom, top = spots[highlight["textposition"][i]](
            8.5 * len(html.unescape(texts[i])) + 4)
        boxes[i] = (x + left, x + right, y + bottom, y + top)
    apart = lambda a, b: a[1] < b[0] or a[0] > b[1] or a[3] < b[2] or a[2] > b[3]  # noqa: E731
    for i in named:
        for j in named:
            if i < j:
                assert apart(boxes[i], boxes[j]), (texts[i], texts[j])
        for j, (x, y) in enumerate(px):
            if j != i:
                assert apart(boxes[i], (x - 5, x + 5, y - 5, y + 5)), (texts[i], texts[j])


def test_disclosure_open_from_the_url(client):
    closed = embeddings_part(text_of(client.get(url("/"))))
    assert '<details class="deeper" id="deeper-emb-map" data-deeper="emb-map">' in closed
    page = embeddings_part(text_of(client.get(url("/", open="emb-map,emb-analogy"))))
    assert '<details class="deeper" id="deeper-emb-map" data-deeper="emb-map" open>' in page
    assert '<details class="deeper" id="deeper-emb-analogy" data-deeper="emb-analogy" open>' in page


def test_analogy_table_is_the_pipelines(client, model):
    tok = model.tokenizer
    page = text_of(client.get(url("/", emb_a="his", emb_b="he", emb_c="she", emb_expect="her")))
    rows = table_rows(page, "Analogy results")
    a, b, c = (tok.encode(" " + w)[0] for w in ("his", "he", "she"))
    ids, sims = analogy(unit_rows(model.params["wte"]), a, b, c, section.ANALOGY_TOP)
    assert [(int(r[2]), r[3]) for r in rows] == \
        [(int(i), f"{s:.3f}") for i, s in zip(ids, sims, strict=True)]
    assert "This one works" in page and "a, b and c themselves are\n    left out" in page
    assert f"(id {a})" in page and f"(id {b})" in page and f"(id {c})" in page


def test_a_poor_analogy_is_called_poor(client, model):
    page = text_of(client.get(url("/", emb_a="father", emb_b="man", emb_c="woman",
                                  emb_expect="mother")))
    verdict = re.search(r'<p class="verdict"[^>]*>(.*?)</p>', page, re.S).group(1)
    assert "A poor result" in verdict and re.search(r"only number \d+ of 4,093", verdict)


def test_a_word_without_leading_space_form_is_used_and_said(client, model):
    page = text_of(client.get(url("/", emb_a="king", emb_b="man", emb_c="woman",
                                  emb_expect="")))
    assert f"king</q> (id {model.tokenizer.encode('king')[0]})" in page
    assert "Type the word you expect" in page


BAD = [
    ({"emb_a": "queen"}, "emb_a", "is not a single token"),
    ({"emb_b": "unaccountably cheerful"}, "emb_b", "is not a single token"),
    ({"emb_c": ""}, "emb_c", "is empty"),
    ({"emb_c": "brother"}, "emb_c", "three different words"),
    ({"emb_expect": "queen"}, "emb_expect", "is not a single token"),
    ({"emb_expect": "he"}, "emb_expect", "one of the three inputs"),
    ({"emb_a": "x" * 41}, "emb_a", "the limit is 40"),
    ({"emb_k": "0"}, "emb_k", "between 1 and 20"),
    ({"emb_k": "21"}, "emb_k", "between 1 and 20"),
    ({"emb_k": "five"}, "emb_k", "whole number"),
]


@pytest.mark.parametrize("query,name,message", BAD, ids=[f"{n}-{i}" for i, (_, n, _) in
                                                         enumerate(BAD)])
@pytest.mark.parametrize("path", ["/", "/section/embeddings"])
def test_bad_value_is_4xx_with_its_message(client, query, name, message, path):
    r = client.get(url(path, **query), headers=HX)
    assert r.status_code in (400, 422)
    assert message in error_message(text_of(r), name)
    assert "HX-Push-Url" not in r.headers


def test_words_round_trip_through_the_url(client):
    q = {"emb_a": "brother", "emb_b": "he", "emb_c": "she", "emb_expect": "", "emb_k": "7"}
    r = client.get(url("/section/embeddings", **{**q, "emb_a": "sister", "emb_c": "he",
                                                  "emb_b": "she"}), headers=HX)
    assert r.status_code == 200
    pushed = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["HX-Push-Url"]).query,
                                   keep_blank_values=True)
    assert pushed == {"emb_a": ["sister"], "emb_b": ["she"], "emb_c": ["he"],
                      "emb_expect": [""], "emb_k": ["7"]}


def test_html_in_a_word_is_inert(client):
    r = client.get(url("/section/embeddings", emb_a="<b>x</b>"), headers=HX)
    assert r.status_code == 422
    body = text_of(r)
    assert "<b>x</b>" not in body and "&lt;b&gt;x&lt;/b&gt;" in body


# --- SmolLM2-135M-Instruct (49,152 tokens): skipped when its package is absent ---

def test_smollm2_vocabulary_map_is_a_density_of_every_token(smol_app):
    app = smol_app
    lm = app.extensions["explainer"].models["smollm2"]
    prompt = "The capital of France is"
    r = app.test_client().get(url("/section/embeddings", model="smollm2", prompt=prompt,
                                  open="emb-map"), headers=HX)
    page = text_of(r)
    assert len(r.data) < 600_000                   # a dot per token was 2.1 MB
    vocab = figures(page)[1]
    density, near, highlight = vocab["data"]
    assert density["type"] == "heatmap"
    assert "shade: tokens per cell" in vocab["layout"]["title"]["text"]
    counts = np.round(10 ** np.nan_to_num(array(density["z"]).astype(np.float64), nan=-np.inf))
    assert counts.sum() == density["meta"]["count"] == 49_152 == lm.model.config.vocab_size
    # the prompt's tokens where pca_2d puts them, and each one's 2 nearest neighbours
    W = lm.model.params["wte"]
    coords, _, _ = pca_2d(W)
    ids = list(dict.fromkeys(lm.tokenizer.encode_ordinary(prompt)))
    assert [c[0] for c in highlight["customdata"]] == ids
    np.testing.assert_allclose(array(highlight["x"]), coords[ids, 0], atol=1e-3)
    unit = unit_rows(W)
    expected = []
    for i in ids:
        expected += [int(n) for n in cosine_neighbours(unit, unit[i], 2, exclude=(i,))[0]
                     if n not in ids and n not in expected]
    assert [c[0] for c in near["customdata"]] == expected
    assert "cells shaded by how many tokens fall in each" in re.sub(r"\s+", " ", page)


def test_the_king_sentence_names_words_the_tokenizer_really_ends_in_king(client, model):
    """The analogy tool's warning names words whose last piece is the token "king"."""
    page = text_of(client.get(url("/section/embeddings", open="emb-analogy"), headers=HX))
    if "its “king” is the end of words like" not in page:
        pytest.skip("the warning is for the Austen model only")
    for word in ("shaking", "seeking"):
        assert f"“{word}”" in page
        pieces = [model.tokenizer.decode([i]) for i in model.tokenizer.encode_ordinary(" " + word)]
        assert pieces[-1] == "king" and len(pieces) == 2
