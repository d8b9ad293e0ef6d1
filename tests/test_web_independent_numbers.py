"""The default page's numbers against a computation that shares no code with pipeline/: a plain
NumPy forward pass of models/austen written here from its config.json and model.safetensors
(Hugging Face's Llama layout and rotate-half RoPE), tiktoken reading the tokenizer's own files,
and the sampler's filters in Hugging Face transformers' order (temperature, top-k, top-p,
min-p). The page is what a student reads; pipeline/ is not asked for any number here.

(This forward pass agrees with transformers' LlamaForCausalLM on these weights: checked by
hand in a separate virtual environment, top next-token probability 0.165085 on the default
prompt both ways.)"""
import html
import json
import os
import re

import numpy as np
import pytest
import tiktoken
from safetensors.numpy import load_file
from tiktoken.load import load_tiktoken_bpe

from pipeline import DEFAULT_MODEL_DIR
from web_support import HX, table_rows, text_of, url, without_definitions


def independent_austen():
    d = DEFAULT_MODEL_DIR
    cfg = json.load(open(os.path.join(d, "config.json")))
    tk = json.load(open(os.path.join(d, "tiktoken_config.json")))
    ranks = load_tiktoken_bpe(os.path.join(d, "tokenizer.tiktoken"))
    enc = tiktoken.Encoding("austen-independent", pat_str=tk["pat_str"], mergeable_ranks=ranks,
                            special_tokens=tk.get("special_tokens", {}))
    stored = load_file(os.path.join(d, "model.safetensors"))
    w = {k: v.astype(np.float64) for k, v in stored.items()}
    return cfg, enc, w


def forward(cfg, w, ids):
    """Logits of every position, each block's residual stream and attention weights, float64."""
    H, KV, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_parameters"]["rope_theta"]
    T = len(ids)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    inv = theta ** -(np.arange(0, hd, 2) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(x):  # [heads, T, hd]
        half = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos + half * sin

    x = w["model.embed_tokens.weight"][ids]
    streams, patterns = [x], []
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd).transpose(1, 0, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hd).transpose(1, 0, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd).transpose(1, 0, 2)
        q, k = rope(q), rope(k)
        k, v = np.repeat(k, H // KV, 0), np.repeat(v, H // KV, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + mask
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        patterns.append(a)
        o = (a @ v).transpose(1, 0, 2).reshape(T, H * hd)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * (h @ w[p + "mlp.up_proj.weight"].T)) @ \
            w[p + "mlp.down_proj.weight"].T
        streams.append(x)

    def read_out(r):
        return rms(r, w["model.norm.weight"]) @ w["model.embed_tokens.weight"].T

    return read_out(x), [read_out(r[-1]) for r in streams], patterns


def softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def hf_order_sampler(logits, temperature, top_k, top_p, min_p):
    """Each stage's probabilities, as transformers' TemperatureLogitsWarper, TopKLogitsWarper,
    TopPLogitsWarper (keep the fewest most probable tokens whose mass reaches p) and
    MinPLogitsWarper (drop a token below min_p times the top probability) leave them."""
    z = logits / temperature
    out = [softmax(z)]
    if top_k:
        z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)
        out.append(softmax(z))
    if top_p < 1:
        p = softmax(z)
        order = np.argsort(-p, kind="stable")
        n = int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1
        keep = np.zeros(p.size, bool)
        keep[order[:n]] = True
        z = np.where(keep, z, -np.inf)
        out.append(softmax(z))
    if min_p:
        p = softmax(z)
        z = np.where(p >= min_p * p.max(), z, -np.inf)
        out.append(softmax(z))
    return out


@pytest.fixture(scope="module")
def reference():
    cfg, enc, w = independent_austen()
    return cfg, enc, w


def plain(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", without_definitions(page))).split())


def section(client, name, **params):
    r = client.get(url(f"/section/{name}", **params), headers=HX)
    assert r.status_code == 200, (name, r.status_code)
    return text_of(r)


def default_prompt(client) -> str:
    page = text_of(client.get("/"))
    m = re.search(r'<textarea[^>]*name="prompt"[^>]*>(.*?)</textarea>', page, re.S)
    return html.unescape(m.group(1)).strip()


def test_tokens_logits_and_sampler_match_an_independent_forward_pass(client, reference):
    cfg, enc, w = reference
    prompt = default_prompt(client)
    ids = enc.encode(prompt)
    logits, _, _ = forward(cfg, w, ids)
    z = logits[-1]

    tok = plain(section(client, "tokenization", prompt=prompt))
    assert f"{len(ids)} tokens from {len(prompt)} characters" in tok

    rows = table_rows(section(client, "logits", prompt=prompt), "Highest-scoring next tokens")
    top = np.argsort(-z)[:len(rows)]
    temp = 0.8
    p1, pt = softmax(z), softmax(z / temp)
    assert [int(r[2]) for r in rows] == [int(i) for i in top]
    for r, i in zip(rows, top, strict=True):
        assert float(r[3]) == pytest.approx(z[i], abs=2e-3)
        assert float(r[4].rstrip("%")) == pytest.approx(100 * p1[i], abs=0.006)
        assert float(r[5].rstrip("%")) == pytest.approx(100 * pt[i], abs=0.006)

    page = section(client, "sampling", prompt=prompt)
    said = plain(page)
    settings = {k: float(v) for k, v in re.findall(
        r"(temperature|top-k|top-p|min-p) = ([0-9.]+):", said)}
    assert settings["temperature"] == temp
    stages = hf_order_sampler(z, settings["temperature"], int(settings["top-k"]),
                              settings["top-p"], settings["min-p"])
    left = [r for r in table_rows(page, "Distribution after each stage", headers=True)
            if r[0] == "tokens left"][0]
    kept = [int(np.count_nonzero(p)) for p in stages]
    assert [int(c.replace(",", "")) for c in left[-len(kept):]] == kept
    assert f"{kept[-1]} of {cfg['vocab_size']:,} tokens can be drawn" in said
    final = stages[-1]
    for r in table_rows(page, "Distribution after each stage", headers=True):
        if r[0] in ("all other tokens", "tokens left") or r[0].startswith("entropy"):
            continue
        [i] = enc.encode(r[0].replace("·", " "))
        if r[-1] == "removed":
            assert final[i] == 0
        else:
            assert float(r[-1].rstrip("%")) == pytest.approx(100 * final[i], abs=0.006)


def test_logit_lens_and_attention_match_an_independent_forward_pass(client, reference):
    cfg, enc, w = reference
    prompt = default_prompt(client)
    ids = enc.encode(prompt)
    logits, lens, patterns = forward(cfg, w, ids)
    answer = int(np.argmax(logits[-1]))

    page = section(client, "block", prompt=prompt, open="blk-lens")
    rows = table_rows(page, "Logit lens: top guesses after each block", headers=True)
    assert len(rows) == cfg["num_hidden_layers"] + 1
    for r, z in zip(rows, lens, strict=True):
        p = softmax(z)
        rank = int((z > z[answer]).sum()) + 1
        m = re.fullmatch(r"rank ([\d,]+), (.+)%", r[-1])
        assert int(m.group(1).replace(",", "")) == rank
        assert float(m.group(2)) == pytest.approx(100 * p[answer], rel=0.05)
        first = re.match(r"(.*) #(\d+) ([\d.]+)%", r[1])
        assert int(first.group(2)) == int(np.argmax(z))
        assert float(first.group(3)) == pytest.approx(100 * p.max(), abs=0.06)

    att = section(client, "attention", prompt=prompt)
    said = plain(att)
    m = re.search(r"the head that looks most at the previous token is layer (\d+), head (\d+) "
                  r"\(both counted from 0\): on average (\d+)%", said)
    prev = np.array([[a[h][np.arange(1, len(ids)), np.arange(len(ids) - 1)].mean()
                      for h in range(a.shape[0])] for a in patterns])
    layer, head = np.unravel_index(np.argmax(prev), prev.shape)
    assert (int(m.group(1)), int(m.group(2))) == (layer, head)
    assert int(m.group(3)) == round(100 * prev[layer, head])
    shown = re.search(r"Click a token: where does it look in layer (\d+), head (\d+)\?", said)
    row = patterns[int(shown.group(1))][int(shown.group(2))][-1]
    chips = re.findall(r'<span class="tok">.*?</span><span class="pct">([\d.]+)%</span>',
                       att.split('aria-label="Attention from the clicked token"', 1)[1]
                       .split("</ol>", 1)[0], re.S)
    assert [float(c) for c in chips] == pytest.approx(100 * row, abs=0.051)


def test_kv_bytes_per_token_match_the_config(client, reference):
    cfg, enc, w = reference
    prompt = default_prompt(client)
    per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 4
    said = plain(section(client, "kvcache", prompt=prompt))
    assert f"The model: {per_token:,} bytes per token" in said
    assert f"{per_token:,} × " in said


def test_quantized_bytes_match_the_documented_formula(client, reference):
    """The quantization section's bytes and ratios from its stated rule, on the config alone:
    int8 one fp16 scale per output channel; int-b groups of g an fp16 scale and a b-bit zero
    point; every parameter outside the blocks' linear layers kept in float32. The ideal ratio
    (32 ÷ bits) is written the same way wherever the section gives it."""
    cfg, enc, w = reference
    d, f, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    kvd = cfg["num_key_value_heads"] * cfg["head_dim"]
    total = sum(v.size for v in w.values())
    linear = L * (2 * d * d + 2 * d * kvd + 3 * d * f)
    out_channels = L * (2 * d + 2 * kvd + 2 * f + d)
    page = section(client, "quantization", prompt=default_prompt(client), open="q-measured")
    said = plain(page)
    bits, group = map(int, re.search(r"int(\d)-g(\d+)", said).groups())
    fp32 = 4 * total
    int8 = linear + 2 * out_channels + 4 * (total - linear)
    groups = linear // group
    intb = linear * bits // 8 + 2 * groups + groups * bits // 8 + 4 * (total - linear)
    assert f"float32: {total:,} parameters × 4 bytes = {fp32:,} B" in said
    assert f"= {int8:,} B ({fp32 / int8:.2f}× smaller)" in said
    assert f"= {intb:,} B ({fp32 / intb:.2f}× smaller)" in said
    assert f"{fp32 / int8:.2f}× smaller with int8" in said
    ideal = f"{32 / bits:.3g}×"
    assert f"and not {ideal} (32 ÷ {bits})" in said
    assert f"not the {32 / 8:.3g}× and {ideal}" in said


def smol_section(smol_app, name, **query):
    r = smol_app.test_client().get(f"/section/{name}", query_string={"model": "smollm2", **query},
                                   headers={**HX, "HX-Target": name})
    assert r.status_code == 200, (name, r.status_code)
    return text_of(r)


def test_smollm2_logits_and_sampler_match_transformers(smol_app):
    """SmolLM2 on "The capital of France is" against what transformers computed on the same GGUF
    file (tests/fixtures/gguf_reference.json: its 200 highest logits). Softmax needs every logit,
    so what is compared is what 200 determine: the logits, the ratios of probabilities
    (p_i / p_j = e^((z_i - z_j) / T)), and the sampler once top-k has kept 40 of them. The
    Logits chart starts at the sampler's temperature: the page shows one T."""
    with open(os.path.join(os.path.dirname(__file__), "fixtures", "gguf_reference.json")) as f:
        ref = json.load(f)["smollm2"]
    case = next(c for c in ref["prompts"] if c["text"] == "The capital of France is")
    top = dict((int(i), z) for i, z in case["top200"])
    page = smol_section(smol_app, "logits", prompt=case["text"])
    said = plain(page)
    sampling = smol_section(smol_app, "sampling", prompt=case["text"])
    settings = {k: float(v) for k, v in re.findall(
        r"(temperature|top-k|top-p|min-p) = ([0-9.]+):", plain(sampling))}
    temp = float(re.search(r"Next token after \S+ at T = ([0-9.]+) :", said).group(1))
    assert temp == settings["temperature"]

    rows = table_rows(page, "Highest-scoring next tokens")
    order = sorted(top, key=lambda i: -top[i])
    assert [int(r[2]) for r in rows] == order[:len(rows)]
    first = rows[0]
    for r in rows:
        i = int(r[2])
        assert float(r[3]) == pytest.approx(top[i], abs=2e-3)
        for col, t in ((4, 1.0), (5, temp)):
            ratio = float(r[col].rstrip("%")) / float(first[col].rstrip("%"))
            want = np.exp((top[i] - top[int(first[2])]) / t)
            assert ratio == pytest.approx(want, rel=0.01, abs=2e-4)

    z = np.array([top[i] for i in order])  # the 200 highest, in order
    k = int(settings["top-k"])
    stages = hf_order_sampler(z[:k], settings["temperature"], 0, settings["top-p"],
                              settings["min-p"])
    kept = [k] + [int(np.count_nonzero(p)) for p in stages[1:]]
    left = [r for r in table_rows(sampling, "Distribution after each stage", headers=True)
            if r[0] == "tokens left"][0]
    assert [int(c.replace(",", "")) for c in left[-len(kept):]] == kept
    final = stages[-1]
    shown = {r[0]: r[-1] for r in table_rows(sampling, "Distribution after each stage",
                                              headers=True)}
    for n, r in enumerate(rows[:8]):
        p = shown[r[1]]
        assert (p == "removed") if final[n] == 0 else \
            float(p.rstrip("%")) == pytest.approx(100 * final[n], abs=0.006)


def test_draws_distance_counts_the_rows_it_is_computed_over(client):
    """The total-variation distance under "Draw many times" says how many tokens it sums over:
    the rows of its table, each of them recomputed from the table's counts and probabilities."""
    page = section(client, "sampling", prompt=default_prompt(client), open="sp-many")
    rows = table_rows(page, "Draws against prediction", headers=True)
    tokens = [r for r in rows if r[0] != "all other tokens"]
    n = sum(int(r[1].replace(",", "")) for r in rows)
    tv = 0.5 * sum(abs(int(r[1].replace(",", "")) / n - float(r[3].rstrip("%")) / 100)
                   for r in rows)
    m = re.search(r"over the (\d+) tokens above .*? as one group: ([0-9.]+)", plain(page))
    assert int(m.group(1)) == len(tokens)
    assert float(m.group(2)) == pytest.approx(tv, abs=2e-4)


def test_beam_note_says_numbers_differ_only_when_they_do(client):
    """On the default prompt the section's settings (length penalty 1) are not the example's
    (no penalty), but every beam runs to the length limit, so the totals are the same: the note
    must not say they differ. Where they do differ it says so."""
    page = section(client, "decoding", prompt=default_prompt(client))
    said = plain(page)
    top = re.search(r"total log p (-?[\d.]+) against (-?[\d.]+)", said)
    note = re.search(r"greedy's total log-probability (-?[\d.]+), beam search's (-?[\d.]+)",
                     said)
    assert note and "These are not the settings above" in said
    same = (top.group(1), top.group(2)) == (note.group(2), note.group(1))
    assert ("differ from the ones above; here they are the same" in said) == same
    assert ("so the numbers differ from the ones above" in said) == (not same)
