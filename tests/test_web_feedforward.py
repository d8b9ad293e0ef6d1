"""The feed-forward section shows the cached pre- and post-activations of the prompt's forward
pass, for SwiGLU (the default model) and GELU (a GPT-2 checkpoint)."""
import base64
import html
import json
import re

import numpy as np
import pytest

from engine_support import get_model
from pipeline.feedforward import histogram, top_neurons, top_tokens
from pipeline.model import gelu, silu
from web.figures.feedforward import CURVE_PLOT_PX
from web.presentation.numbers import fixed
from web_support import error_message, every_section, table_rows, text_of, url

PROMPT = "Mr. Darcy bowed to Elizabeth, and Elizabeth smiled at Mr. Darcy."


def cache_of(m, prompt=PROMPT):
    return m.run_with_cache(m.tokenizer.encode_ordinary(prompt))[1]


def figures_of(page):
    body = page.split('<section id="feedforward"', 1)[1].split("</section>", 1)[0]
    return [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', body)]


def decoded(typed):
    dtype = {"f4": np.float32, "i4": np.int32}[typed["dtype"]]
    return np.frombuffer(base64.b64decode(typed["bdata"]), dtype)


def neuron_values(page, neuron):
    m = re.search(r'<ol[^>]*aria-label="Neuron %d at each token"[^>]*>(.*?)</ol>' % neuron,
                  page, re.S)
    assert m, f"no row for neuron {neuron}"
    return re.findall(r'<span class="pct">([^<]*)</span>', m.group(1))


@pytest.mark.parametrize("layer,t", [(0, 4), (3, 9)])
def test_top_neurons_are_the_caches(client, model, layer, t):
    cache = cache_of(model)
    page = text_of(client.get(url("/", prompt=PROMPT, ffn_layer=layer, ffn_token=t),
                              headers=every_section()))
    b = f"blocks.{layer}.mlp."
    gate, up, post = (cache[b + n][t] for n in ("hook_pre", "hook_pre_linear", "hook_post"))
    rows = table_rows(page, "Most active neurons")
    want = top_neurons(post, 10)
    assert [int(r[0]) for r in rows] == want.tolist()
    for r, n in zip(rows, want, strict=True):
        assert r[1:] == [fixed(gate[n], 4), fixed(silu(gate)[n], 4), fixed(up[n], 4),
                         fixed(post[n], 4)]
    share = 100 * np.abs(post[want]).sum() / np.abs(post).sum()
    assert re.search(r"most active neurons carry\s+%s%% of the total size" % ("%.1f" % share), page)
    # the default neuron is the most active one, shown across the prompt
    column = cache[b + "hook_post"][:, want[0]]
    # written as the page writes numbers: a value that rounds to zero is "0.000", never "-0.000"
    assert neuron_values(page, int(want[0])) == [fixed(v, 3) for v in column]
    named = re.search(r'<p id="ffn-neuron-top">(.*?)</p>', page, re.S).group(1)
    assert [int(s) for s in re.findall(r"\(token (\d+)\)", named)] == \
        top_tokens(cache[b + "hook_post"], int(want[0]), 5).tolist()


def test_the_curve_carries_the_real_values(client, model):
    cache = cache_of(model)
    page = text_of(client.get(url("/", prompt=PROMPT, ffn_layer=2, ffn_token=5),
                              headers=every_section()))
    curve, hist = figures_of(page)
    gate = cache["blocks.2.mlp.hook_pre"][5]
    line, dots, top = curve["data"]
    np.testing.assert_array_equal(decoded(dots["x"]), gate)
    np.testing.assert_array_equal(decoded(dots["y"]), silu(gate))
    x = decoded(line["x"])
    np.testing.assert_array_equal(decoded(line["y"]), silu(x))
    assert x.min() < gate.min() and x.max() > gate.max()
    counts, _ = histogram(cache["blocks.2.mlp.hook_post"][5], 40)
    assert hist["data"][0]["y"] == counts.tolist() and sum(hist["data"][0]["y"]) == 768


def test_neuron_numbers_on_the_curve_do_not_crowd(client, model):
    page = text_of(client.get(url("/", prompt=PROMPT, ffn_layer=2, ffn_token=5),
                              headers=every_section()))
    _, dots, top = figures_of(page)[0]["data"]
    xs, ys = decoded(top["x"]), decoded(top["y"])
    named = [k for k, t in enumerate(top["text"]) if t]
    assert named and [top["text"][k] for k in named] == [str(top["customdata"][k]) for k in named]
    assert len(named) < len(xs)                    # this token: some crowd, and are left out
    # no two written numbers' boxes (8.5 px a character plus 4, by 20 px, right of the point, on
    # a phone's plot of the curve's extent) overlap
    curve = figures_of(page)[0]["data"][0]
    cx, cy = decoded(curve["x"]), decoded(curve["y"])
    width, height = CURVE_PLOT_PX
    px = lambda k: (xs[k] / np.ptp(cx) * width, ys[k] / np.ptp(cy) * height)  # noqa: E731
    for i in named:
        for j in named:
            if i < j:
                (xi, yi), (xj, yj) = px(i), px(j)
                wi, wj = 4 + 8.5 * len(top["text"][i]), 4 + 8.5 * len(top["text"][j])
                assert abs(yi - yj) > 20 or xi + 7 + wi < xj + 7 or xj + 7 + wj < xi + 7


def test_feedforward_disclosures_open_from_the_url(client):
    closed = text_of(client.get(url("/", prompt=PROMPT), headers=every_section()))
    assert '<details class="deeper" id="deeper-ffn-neurons" data-deeper="ffn-neurons">' in closed
    page = text_of(client.get(url("/", prompt=PROMPT, open="ffn-neurons"), headers=every_section()))
    assert '<details class="deeper" id="deeper-ffn-neurons" data-deeper="ffn-neurons" open>' in page


def test_formula_check_is_stated(client, model):
    page = " ".join(text_of(client.get(url("/", prompt=PROMPT), headers=every_section())).split())
    assert "This model uses SwiGLU." in page
    n = len(model.tokenizer.encode_ordinary(PROMPT))
    m = re.search(r"largest difference ([0-9.e+-]+) over this token's 768 neurons, "
                  rf"([0-9.e+-]+) over all {n} tokens of layer 3", page)
    assert m and float(m.group(1)) < 1e-6 and float(m.group(2)) < 1e-6


def test_choosing_a_neuron(client, model):
    cache = cache_of(model)
    page = text_of(client.get(url("/", prompt=PROMPT, ffn_layer=1, ffn_neuron=700),
                              headers=every_section()))
    assert neuron_values(page, 700) == ["%.3f" % v for v in cache["blocks.1.mlp.hook_post"][:, 700]]


def test_gpt2_checkpoint_uses_gelu():
    from app import create_app
    m = get_model("gpt2")
    client = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                         "WARM_CACHES": False}).test_client()
    prompt = "hello world, hello there"
    r = client.get(url("/section/feedforward", prompt=prompt, ffn_layer=0, ffn_token=2))
    assert r.status_code == 200
    page = text_of(r)
    assert "This model uses GELU." in page and "gelu(pre)" in page
    cache = cache_of(m, prompt)
    pre, post = cache["blocks.0.mlp.hook_pre"][2], cache["blocks.0.mlp.hook_post"][2]
    rows = table_rows(page, "Most active neurons")
    assert [int(r[0]) for r in rows] == top_neurons(post, 10).tolist()
    assert rows[0][1:] == ["%.4f" % pre[int(rows[0][0])], "%.4f" % post[int(rows[0][0])]]
    dots = figures_of(page)[0]["data"][1]
    np.testing.assert_array_equal(decoded(dots["y"]), post)       # the cached outputs...
    np.testing.assert_allclose(gelu(decoded(dots["x"])), post, rtol=1e-6, atol=1e-7)  # on gelu


BAD = [({"ffn_token": "{n}"}, "ffn_token", 422, "Token {n} does not exist: this prompt has {n} "),
       ({"ffn_token": "two"}, "ffn_token", 400, "whole number"),
       ({"ffn_layer": "4"}, "ffn_layer", 422, "Layer 4 does not exist: this model has 4"),
       ({"ffn_layer": "-1"}, "ffn_layer", 422, "between"),
       ({"ffn_neuron": "768"}, "ffn_neuron", 422, "Neuron 768 does not exist: this layer has 768"),
       ({"ffn_neuron": "1e3"}, "ffn_neuron", 400, "whole number from 0 to 767, or empty"),
       ({"ffn_neuron": "-3"}, "ffn_neuron", 400, "got '-3'")]


@pytest.mark.parametrize("query,name,status,message", BAD)
@pytest.mark.parametrize("path", ["/", "/section/feedforward"])
def test_bad_values_get_a_4xx_and_a_message(client, model, query, name, status, message, path):
    n = len(model.tokenizer.encode_ordinary(PROMPT))               # one past the last token
    query = {k: v.format(n=n) for k, v in query.items()}
    message = message.format(n=n)
    r = client.get(url(path, prompt=PROMPT, **query), headers=every_section())
    assert r.status_code == status
    assert message in error_message(text_of(r), name)
    assert table_rows(text_of(r), "Most active neurons")            # the default view is drawn
