"""The quantization section: its numbers are the pipeline's (recomputed here independently of
the section's caches), bad values are 4xx with a message next to the control, state
round-trips through the URL."""
import html
import json
import os
import re

import numpy as np
import pytest

from pipeline import quantize
from pipeline.generation import decode_loop
from pipeline.published import published
from web.core.params import PROMPT
from web_support import HX, MARKS, error_message, every_section, reading_text, text_of, url


def marks_to_text(inner: str) -> str:
    """Text shown with whitespace marks, as the characters it stands for."""
    text = html.unescape(re.sub(r"<[^>]+>", "", inner))
    return "".join(MARKS.get(ch, ch) for ch in text)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows_of(page: str, label: str) -> dict:
    """{row header text: [cell texts]} of the table labelled `label`."""
    m = re.search(r'<table[^>]*aria-label="%s"[^>]*>(.*?)</table>' % re.escape(label), page, re.S)
    assert m, f"no table labelled {label!r}"
    body = m.group(1).split("<tbody>", 1)[1]
    out = {}
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
        head = re.search(r"<th[^>]*>(.*?)</th>", tr, re.S).group(1)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        clean = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in [head] + cells]
        out[clean[0].split(" (")[0]] = clean[1:]
    return out


@pytest.fixture(scope="module")
def windows(model):
    text = open(os.path.join(ROOT, "data", "heldout_pride_and_prejudice_ch10.txt")).read()
    from web.sections.quantization import HELDOUT_WINDOWS
    return quantize.heldout_windows(model.tokenizer, text, HELDOUT_WINDOWS, 256)


@pytest.mark.parametrize("bits,group", [(3, 32), (4, 128)])
def test_table_is_the_pipelines_numbers(client, model, windows, bits, group):
    prompt = "Elizabeth was determined to be civil."
    page = text_of(client.get(url("/section/quantization", prompt=prompt, q_group=group,
                                  q_bits=bits, open="q-measured"), headers=HX))
    rows = rows_of(page, "Quantized models compared")
    ids = model.tokenizer.encode_ordinary(prompt)
    float_logits = model.forward(ids)
    float_held = quantize.heldout_perplexity(model, windows)
    assert rows["float32"][0] == f"{4 * model.n_params():,} B"
    assert rows["float32"][-1] == f"{float_held.perplexity:.3f}"
    for name, s in (("int8", quantize.INT8),
                    (f"int{bits}-g{group}", quantize.grouped(bits, group))):
        qm = quantize.quantize_model(model, s)
        logits = qm.model.forward(ids)
        held = quantize.heldout_perplexity(qm.model, windows)
        memory, bits, change, top1, top1_held, ppl = rows[name]
        assert memory == f"{qm.nbytes:,} B"
        n_linear = sum(w.size for w in quantize.linear_weights(model.params).values())
        assert bits == f"{8 * qm.matrix_bytes / n_linear:.3f}"
        assert change == f"{np.abs(logits - float_logits).max():.4f}"
        assert top1 == f"{100 * np.mean(logits.argmax(-1) == float_logits.argmax(-1)):.1f}%"
        assert top1_held == f"{100 * np.mean(held.top1 == float_held.top1):.1f}%"
        assert ppl == f"{held.perplexity:.3f}"


def test_int4_bytes_worked_out(client):
    page = html.unescape(text_of(client.get(url("/section/quantization", open="q-measured",
                                                q_bits=4), headers=HX)))
    # austen: 3,014,656 linear weights; groups of 32 along the inputs of every column
    assert "3,014,656 weights × 4 bits / 8\n      = 1,507,328 B of codes" in page
    assert "94,208 scales × 2 B + 94,208 zero points × ½ B" in page
    assert f"= {1_507_328 + 94_208 * 2 + 94_208 // 2:,} B" in page


def test_int3_bytes_worked_out(client, model):
    """The default scheme, 3 bits in groups of 32: eight codes in three bytes."""
    page = html.unescape(text_of(client.get(url("/section/quantization", open="q-measured"),
                                            headers=HX)))
    assert "3,014,656 weights × 3 bits / 8\n      = 1,130,496 B of codes" in page
    assert "94,208 scales × 2 B + 94,208 zero points × ⅜ B" in page
    qm = quantize.quantize_model(model, quantize.grouped(3, 32))
    assert qm.matrix_bytes == 1_130_496 + 94_208 * 2 + 94_208 * 3 // 8
    assert f"= {qm.matrix_bytes:,} B" in page


def test_greedy_texts(client, model):
    prompt = "Mr. Darcy"
    page = text_of(client.get(url("/section/quantization", prompt=prompt, open="q-measured"),
                              headers=HX))
    ids = model.tokenizer.encode_ordinary(prompt)
    from web.sections.quantization import GREEDY_TOKENS
    m = re.search(r'aria-label="Greedy text of float32">(.*?)</p>', page, re.S)
    shown = marks_to_text(m.group(1))
    tokens = [p.token for p in decode_loop(model, ids, GREEDY_TOKENS)]
    assert shown == model.tokenizer.decode(tokens)
    int8 = quantize.quantize_model(model, quantize.INT8).model
    m = re.search(r'aria-label="Greedy text of int8">(.*?)</p>', page, re.S)
    shown = marks_to_text(m.group(1))
    assert shown == model.tokenizer.decode([p.token for p in decode_loop(int8, ids, GREEDY_TOKENS)])


@pytest.mark.parametrize("bits", [3, 4])
def test_calculator_rows_are_the_formula(client, bits):
    page = text_of(client.get(url("/section/quantization", q_group=64, q_bits=bits,
                                  open="q-measured"), headers=HX))
    rows = rows_of(page, "Weight memory of published models")
    from web.sections.quantization import CALC_MODELS
    assert list(rows) == list(CALC_MODELS)     # a few models: the block section lists them all
    for name in CALC_MODELS:
        p = published(name)
        shown = rows[name]
        assert len(shown) == 3                 # only this section's columns: 16, 8, `bits` bits
        for cell, s in zip(shown, (None, quantize.INT8, quantize.grouped(bits, 64)), strict=True):
            memory = quantize.weight_memory(p.config, p.reported_params, s)
            assert cell == f"{memory.total_bytes / 1e9:.2f} GB"
    assert rows["Llama 3 8B"][0] == "16.06 GB"               # 8,030,261,248 x 2 bytes
    assert 'href="#block"' in page


def test_histogram_levels(client, model):
    page = text_of(client.get(url("/section/quantization", q_matrix="blocks.1.attn.w_v"),
                              headers=HX))
    assert '<option value="blocks.1.attn.w_v" selected>' in page
    w = model.params["blocks"][1]["attn"]["w_v"]
    column = int(np.abs(w).max(0).argmax())
    assert f"channel {column} of a 256 × 64" in html.unescape(page)
    figs = re.findall(r'data-figure="([^"]*)"', page)
    int4 = json.loads(html.unescape(figs[1]))
    levels = [x for x in int4["data"][1]["x"] if x is not None][::2]
    assert len(levels) == 8                    # the default: 3 bits, groups of 32
    qm = quantize.quantize_matrix(w, quantize.grouped(3, 32))
    group = int(np.abs(w[:, column]).argmax()) // 32
    np.testing.assert_allclose(levels, qm.levels(group, column), rtol=1e-6)


BAD = [
    ({"q_group": "50"}, "q_group", 422, "Group size must be one of 32, 64, 128; got 50."),
    ({"q_group": "0"}, "q_group", 422, "Group size must be one of 32, 64, 128; got 0."),
    ({"q_group": "big"}, "q_group", 400, "Group size must be a whole number, not 'big'."),
    ({"q_bits": "2"}, "q_bits", 422, "Bits (grouped scheme) must be one of 3, 4; got 2."),
    ({"q_matrix": "wte"}, "q_matrix", 422, "Matrix must be one of blocks.0.attn.w_q, "
     "blocks.0.attn.w_k, blocks.0.attn.w_v, …, blocks.3.mlp.w_down (28 in all); got 'wte'."),
    ({"q_matrix": "x" * 65}, "q_matrix", 422, "Matrix is 65 characters long; the limit is 64."),
]


@pytest.mark.parametrize("query,name,status,message", BAD)
def test_bad_values_get_a_message_next_to_their_control(client, query, name, status, message):
    for path in ("/", "/section/quantization"):
        r = client.get(url(path, **query), headers=HX if path != "/" else every_section())
        assert r.status_code == status
        assert error_message(text_of(r), name).startswith(message)
    # the rest of the section still renders with the default
    page = text_of(client.get(url("/section/quantization", **query, open="q-measured"),
                              headers=every_section()))
    assert "Quantized models compared" in page


def test_state_round_trips_through_the_url(client):
    r = client.get(url("/section/quantization", q_group=128, q_matrix="blocks.3.mlp.w_up"),
                   headers=HX)
    assert r.headers["HX-Push-Url"] == "/?q_group=128&q_matrix=blocks.3.mlp.w_up"
    page = text_of(client.get(r.headers["HX-Push-Url"], headers=every_section()))
    assert '<option value="128" selected>' in page
    assert '<option value="blocks.3.mlp.w_up" selected>' in page
    # the defaults are left out
    assert client.get("/section/quantization",
                      headers=every_section()).headers["HX-Push-Url"] == "/"
    assert client.get(url("/section/quantization", q_group=32, q_matrix="blocks.0.mlp.w_down"),
                      headers=HX).headers["HX-Push-Url"] == "/"


def test_default_prompt(client):
    assert client.get(url("/section/quantization", prompt=PROMPT.default),
                      headers=HX).status_code == 200


def test_core_and_its_disclosure(client):
    """The core states the measured shrink and perplexities of the table below it; the table
    sits in a disclosure that the URL's `open` opens."""
    rows = rows_of(text_of(client.get(url("/section/quantization", q_group=64, q_bits=4,
                                          open="q-measured"), headers=HX)),
                   "Quantized models compared")
    page = text_of(client.get(url("/section/quantization", q_group=64, q_bits=4), headers=HX))
    m = re.search(r'<p class="stats" id="q-headline">(.*?)</p>', page, re.S)
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", m.group(1))))
    f32 = int(rows["float32"][0].replace(",", "").split()[0])
    for name in ("int8", "int4-g64"):
        size = int(rows[name][0].replace(",", "").split()[0])
        assert f"{f32 / size:.2f}×" in text
        assert f"{float(rows[name][-1]):.2f} ({name})" in text
    assert f"{float(rows['float32'][-1]):.2f} in float32" in text
    closed = r'<details class="deeper" id="deeper-q-measured"[^>]*\bopen\b'
    assert not re.search(closed, page)
    page = text_of(client.get(url("/section/quantization", open="q-measured"), headers=HX))
    assert re.search(closed, page)
    # int8's 255 levels are not drawn (they would merge into a band): the step is written
    int8 = json.loads(html.unescape(re.findall(r'data-figure="([^"]*)"', page)[0]))
    assert len(int8["data"]) == 1 and "255 levels" in int8["layout"]["title"]["text"]


def test_austen_section_says_nothing_of_a_file_format(client):
    page = text_of(client.get(url("/section/quantization", open="q-measured"), headers=HX))
    assert 'id="q-arrived"' not in page and "deeper-q-file" not in page
    assert "Perplexity on an unseen chapter" in reading_text(page)
    assert 'perplexity <span class="nowrap">(held-out)</span>' in page
    assert "Not called held-out" not in page


# --- SmolLM2-135M-Instruct, read from its Q4_1 GGUF file: skipped when its package is absent ---

@pytest.fixture()
def smol(smol_app):
    with smol_app.app_context():
        yield smol_app.test_client(), smol_app.extensions["explainer"].models["smollm2"]


def plain(fragment: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", fragment))).strip()


def test_smollm2_says_how_its_file_stores_it(smol):
    import gguf
    client, lm = smol
    prompt = "The capital of France is"
    page = text_of(client.get(url("/section/quantization", model="smollm2", prompt=prompt,
                                  open="q-file,q-measured"), headers=HX))
    counts = {}
    tensors = gguf.GGUFReader(lm.model.path).tensors
    for t in tensors:                                  # counted from the file, not the engine
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    assert counts == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    arrived = plain(re.search(r'<p class="stats" id="q-arrived">(.*?)</p>', page, re.S).group(1))
    for type_name, n in counts.items():
        assert f"{n} {'tensor' if n == 1 else 'tensors'} as {type_name}" in arrived
    assert f"{sum(int(t.n_bytes) for t in tensors):,} B of tensor data" in arrived
    assert f"{4 * sum(int(t.n_elements) for t in tensors):,} B as float32" in arrived
    assert ("What this section quantizes is the engine's float32 copy, dequantized from the file"
            in reading_text(re.search(r'<p class="stats" id="q-arrived">.*?</p>', page,
                                      re.S).group(0)))
    # the chapter is not called held-out for a model trained elsewhere
    assert "Perplexity on a chapter of" in reading_text(page) and "unseen chapter" not in page
    assert "held-out" not in plain(re.search(r'<table[^>]*aria-label="Quantized models '
                                             r'compared".*?</table>', page, re.S).group(0))
    assert "Not called held-out" in reading_text(page)
    assert "the first window of 128 tokens" in plain(page)


def test_smollm2_block_bytes_codes_and_weights_are_the_files_and_engines(smol):
    client, lm = smol
    model = lm.model
    prompt = "The capital of France is"
    page = text_of(client.get(url("/section/quantization", model="smollm2", prompt=prompt,
                                  open="q-file"), headers=HX))
    cases = [(("blocks", 0, "attn", "w_q"), 0, "Q4_1"),
             (("wte",), model.tokenizer.encode_ordinary(prompt)[-1] * 576 // 32, "Q8_0")]
    for path, k, type_name in cases:
        st = model.stored[path]
        assert st.type_name == type_name
        with open(model.path, "rb") as f:             # the bytes, read here without the app
            f.seek(st.offset + k * st.block_bytes)
            raw = f.read(st.block_bytes)
        label = f"The {st.block_bytes} bytes of {type_name} block {k} of {st.name}"
        m = re.search(r'aria-label="%s"><code>(.*?)</code>' % re.escape(label), page, re.S)
        assert m, label
        assert plain(m.group(1)) == raw.hex(" ")
        m = re.search(r'<ol[^>]*aria-label="%s decoded">(.*?)</ol>'
                      % re.escape(f"{type_name} block {k} of {st.name}"), page, re.S)
        codes = [plain(c) for c in re.findall(r'<span class="q-code">(.*?)</span>', m.group(1))]
        weights = [plain(c) for c in re.findall(r'<span class="q-w">(.*?)</span>', m.group(1))]
        # decoded independently: ggml's layouts written out
        if type_name == "Q4_1":
            d, mn = np.frombuffer(raw[:4], "<f2").astype(np.float32)
            qs = np.frombuffer(raw[4:], np.uint8)
            q = np.concatenate([qs & 0xF, qs >> 4]).astype(np.float32)
            w = d * q + mn
        else:
            d = np.frombuffer(raw[:2], "<f2").astype(np.float32)[0]
            q = np.frombuffer(raw[2:], np.int8).astype(np.float32)
            w = q * d
        assert codes == [str(int(x)) for x in q]
        assert weights == [f"{x:.4f}" for x in w]
        # ... and they are the engine's weights: w_q's stored row 0 is un-permuted column 0
        engine = (model.params["wte"][k * 32 // 576, :32] if path == ("wte",)
                  else model.params["blocks"][0]["attn"]["w_q"][:32, 0])
        np.testing.assert_array_equal(w, engine)
    assert plain(page).count("to the weights the engine uses") == 2
    assert "Not equal" not in page


def test_smollm2_requantizing_is_measured(smol):
    from web.sections import quantization as section
    client, lm = smol
    page = plain(text_of(client.get(url("/section/quantization", model="smollm2",
                                        open="q-file"), headers=HX)))
    for name in ("int8", "int3-g32"):                # the default: 3 bits, groups of 32
        change = quantize.weight_change(lm.model, section.quantized(lm.model, name))
        assert (f"{name}: {100 * change['unchanged']:.2f}% come back exactly; the change is "
                f"{100 * change['relative_rms']:.2f}% of the weights' RMS") in page
    assert "106,168,320 weights" in page


def test_what_each_scheme_does_to_the_prompt_is_run_only_while_shown(client, model, monkeypatch):
    """Closed, the two disclosures that show each scheme on the prompt (logits, top tokens,
    greedy texts) hold a note that asks for them when one opens, and no quantized model runs;
    open, they are there."""
    from web.sections import quantization as section
    prompt = "Elizabeth smiled at her sister."
    client.get(url("/", prompt=prompt))
    ran = []
    for name in ("prompt_logits", "greedy_tokens"):
        original = getattr(section, name)
        monkeypatch.setattr(section, name, lambda *a, _f=original,
                            _n=name: ran.append(_n) or _f(*a))
    closed = text_of(client.get(url("/section/quantization", prompt=prompt, q_group=128),
                                headers=HX))
    assert ran == [] and "Quantized models compared" not in closed
    assert 'id="q-wait-measured"' in closed
    assert 'hx-trigger="toggle from:closest details"' in closed
    assert 'hx-target="#quantization-measured"' in closed
    opened = text_of(client.get(url("/section/quantization", prompt=prompt, q_group=128,
                                    open="q-measured"), headers=HX))
    assert "Quantized models compared" in opened and 'id="q-wait-measured"' not in opened
    assert set(ran) == {"prompt_logits", "greedy_tokens"}


def test_the_default_scheme_shows_what_quantizing_costs(client, model, windows):
    """At the defaults the grouped scheme's loss shows: perplexity on the held-out chapter
    moves by more than 1% and the greedy text of the default prompt parts from float32's
    (computed here by the pipeline); 4 bits, which barely move this model, are one click away
    and the page says so with its numbers."""
    from web.sections.quantization import DEFAULT_BITS, DEFAULT_GROUP, GREEDY_TOKENS, PARAMS
    assert DEFAULT_BITS == next(p.default for p in PARAMS if p.name == "q_bits")
    default = quantize.grouped(DEFAULT_BITS, DEFAULT_GROUP)
    four = quantize.grouped(4, DEFAULT_GROUP)
    float_held = quantize.heldout_perplexity(model, windows)
    qm = quantize.quantize_model(model, default)
    held = quantize.heldout_perplexity(qm.model, windows)
    held4 = quantize.heldout_perplexity(quantize.quantize_model(model, four).model, windows)
    change, change4 = (held.perplexity / float_held.perplexity - 1,
                       held4.perplexity / float_held.perplexity - 1)
    assert change > 0.01 and change > 3 * change4
    from web.model_state.explainer import AUSTEN_PROMPTS  # the page's prompt without one in the URL
    ids = model.tokenizer.encode_ordinary(AUSTEN_PROMPTS[0])
    greedy = [p.token for p in decode_loop(model, ids, GREEDY_TOKENS)]
    quantized = [p.token for p in decode_loop(qm.model, ids, GREEDY_TOKENS)]
    assert quantized != greedy
    first = next(i for i, (a, b) in enumerate(zip(quantized, greedy, strict=False)) if a != b)
    page = text_of(client.get(url("/section/quantization", open="q-measured"), headers=HX))
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert f"{held.perplexity:.2f} ({default.name})" in text
    assert re.search(rf"{default.name} ?: differs from token {first + 1} on", text)
    assert (f"Perplexity: {100 * change:+.1f}% with {default.name}, "
            f"{100 * change4:+.1f}% with {four.name}") in text
    assert """hx-vals='{"q_bits": "4"}'>try 4 bits</button>""" in page
    assert (f"At 4 bits this model hardly changes ({100 * change4:+.1f}%, "
            f"{float_held.perplexity:.2f} → {held4.perplexity:.2f})") in text


# --- The two histograms side by side share one x scale -----------------------------------------

def histograms_of(page: str) -> list:
    figs = [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]
    return [f for f in figs if f["data"] and f["data"][0].get("name") == "weights"]


def assert_one_x_scale(page: str) -> None:
    """int8's and int3/int4's histograms: equal x ranges that hold both figures' bars and level
    lines, and one bin width, so the group reads as a slice of the channel."""
    pair = histograms_of(page)
    assert len(pair) == 2
    ranges = [f["layout"]["xaxis"]["range"] for f in pair]
    assert ranges[0] == ranges[1]
    lo, hi = ranges[0]
    for fig in pair:
        bars = fig["data"][0]
        half = bars["width"] / 2
        assert lo <= min(bars["x"]) - half + 1e-9 and max(bars["x"]) + half <= hi + 1e-9
        for trace in fig["data"][1:]:                       # the levels' lines
            xs = [x for x in trace["x"] if x is not None]
            assert lo <= min(xs) and max(xs) <= hi
    assert pair[0]["data"][0]["width"] == pytest.approx(pair[1]["data"][0]["width"])
    # heights are counts of different populations (a channel, a group): each its own y range
    for fig in pair:
        assert fig["layout"]["yaxis"]["range"][1] >= max(fig["data"][0]["y"])


@pytest.mark.parametrize("bits,group,matrix", [(3, 32, "blocks.1.attn.w_v"),
                                               (4, 128, "blocks.3.mlp.w_down")])
def test_int8_and_grouped_histograms_share_one_x_scale(client, bits, group, matrix):
    assert_one_x_scale(text_of(client.get(url("/section/quantization", q_bits=bits,
                                              q_group=group, q_matrix=matrix), headers=HX)))


def test_smollm2_histograms_share_one_x_scale(smol):
    client, _ = smol
    assert_one_x_scale(text_of(client.get(url("/section/quantization", model="smollm2"),
                                          headers=HX)))


# --- kept on the server's disk ----------------------------------------------------------------

def test_arrays_kept_on_disk_are_read_back_mapped_and_old_code_is_pruned(tmp_path, model):
    """DiskCache.arrays: computed once, then read back (mapped, equal) by a later start; a key
    that names no stable thing is computed and not kept; a copy kept by another version of
    the code it names is deleted when the new one is written."""
    from web.core.cache import model_key
    from web.model_state.disk_cache import DiskCache
    value = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "n": [np.arange(5), 7],
             "z": np.zeros(0, dtype=np.uint8), "t": ("int3", np.ones((2, 2), np.float16))}
    key = (model_key(model), "a test")
    first = DiskCache(str(tmp_path))
    got = first.arrays("tests", key, lambda: value, ("pipeline/quantize.py",))
    assert first.written == 1 and first.read == 0

    def fail():
        raise AssertionError("computed again")
    later = DiskCache(str(tmp_path))
    back = later.arrays("tests", key, fail, ("pipeline/quantize.py",))
    assert later.read == 1 and later.written == 0
    for v in (got, back):
        assert isinstance(v["w"], np.memmap) and not v["w"].flags.writeable
        np.testing.assert_array_equal(v["w"], value["w"])
        np.testing.assert_array_equal(v["n"][0], value["n"][0])
        assert v["n"][1] == 7 and v["z"].shape == (0,) and v["t"][0] == "int3"
        assert v["t"][1].dtype == np.float16 and (v["t"][1] == 1).all()
    home = os.path.join(str(tmp_path), "startup-cache", "arrays", "tests")
    [key_dir] = os.listdir(home)
    before = set(os.listdir(os.path.join(home, key_dir)))
    other = DiskCache(str(tmp_path)).arrays("tests", key, lambda: value,
                                            ("pipeline/speculative.py",))
    after = set(os.listdir(os.path.join(home, key_dir)))
    assert len(before) == len(after) == 1 and before != after
    np.testing.assert_array_equal(other["w"], value["w"])
    [folder] = after                            # kept, then unreadable: computed again
    with open(os.path.join(home, key_dir, folder, "kept.pickle"), "wb") as f:
        f.write(b"not a pickle")
    broken = DiskCache(str(tmp_path))
    again = broken.arrays("tests", key, lambda: value, ("pipeline/speculative.py",))
    assert broken.written == 1 and broken.read == 0
    np.testing.assert_array_equal(again["n"][0], value["n"][0])
    calls = []
    loose = DiskCache(str(tmp_path)).arrays("tests", (object(),),
                                            lambda: calls.append(1) or value, ())
    assert calls == [1] and loose is value


def test_a_big_models_schemes_are_kept_on_disk_mapped_and_are_the_quantized_model(
        app, model, tmp_path, monkeypatch):
    """A big model served with a disk cache keeps each scheme there (its codes and float32
    weights, mapped): the same arrays, bytes and logits as quantize_model; the weights' change
    is kept too, and a later start reads both back. The Austen model stands in for a big one
    here (SmolLM2's schemes are 3 GB)."""
    from web.core.cache import model_key
    from web.model_state.disk_cache import DiskCache, kept
    from web.sections import quantization as section
    monkeypatch.setattr(section, "big", lambda m: True)
    disk = DiskCache(str(tmp_path))
    monkeypatch.setitem(app.extensions, "disk_cache", disk)
    name = "int3-g64"
    with app.app_context():
        assert section.kept_on_disk(model)
        scheme = section.quantized(model, name)
        assert disk.written == 1
        held = quantize.quantize_model(model, quantize.scheme(name))
        w = scheme.model.params["blocks"][1]["mlp"]["w_down"]
        assert isinstance(w, np.memmap)
        np.testing.assert_array_equal(w, held.model.params["blocks"][1]["mlp"]["w_down"])
        assert scheme.nbytes == held.nbytes
        ids = model.tokenizer.encode_ordinary("Elizabeth smiled")
        np.testing.assert_array_equal(scheme.model.forward(ids), held.model.forward(ids))
        change = quantize.weight_change(model, held)
        assert section.weight_change(model, name) == change

        def fail():
            raise AssertionError("computed again")
        # a later start reads the scheme and its weights' change back, computing nothing
        again = DiskCache(str(tmp_path))
        monkeypatch.setitem(app.extensions, "disk_cache", again)
        assert kept("quantization", ("weight change", model_key(model), name), fail) == change
        back = again.arrays("quantized schemes", (model_key(model), name), fail,
                            section.SCHEME_CODE)
        np.testing.assert_array_equal(back["blocks.1.mlp.w_down"]["weights"], w)
        assert again.read == 2 and again.written == 0


def test_the_warm_up_runs_every_scheme_on_the_default_prompt(app, client):
    """The page opens on the default prompt: after the section's warm-up, every bits and group
    size there, its disclosures open, runs no quantized pass and no greedy text again."""
    from web.sections import quantization as section
    lm = app.extensions["explainer"].default_model
    with app.app_context():
        section.warm(lm)
    memos = (section.prompt_logits.memo, section.greedy_tokens.memo)
    before = [m.computed for m in memos]
    for bits in quantize.GROUPED_BITS:
        for group in quantize.GROUP_SIZES:
            r = client.get(url("/section/quantization", q_bits=bits, q_group=group,
                               open="q-measured"), headers=HX)
            assert r.status_code == 200 and "Quantized models compared" in text_of(r)
    assert [m.computed for m in memos] == before
