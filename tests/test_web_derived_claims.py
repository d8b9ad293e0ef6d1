"""Sentences that state a computed fact follow the computation: the roofline's and the
generation loop's memory- or compute-bound verdicts, the quantization section's memory ratios,
what it keeps in float and its window, the GPT-2 paper's count, the weight bytes the roofline and
quantization sections share, the chips' memory and the server's copy size."""
import html
import re

import pytest

from engine_support import get_model
from pipeline import quantize
from pipeline.published import published
from pipeline.roofline import (
    HARDWARE,
    Machine,
    compute_bound_from,
    model_costs,
    prefill_work,
    roofline,
    weight_scheme,
)
from pipeline.sizes import parameter_counts
from web.sections import generation
from web_support import HX, text_of, url, without_definitions


def plain(page):
    text = re.sub(r"<[^>]+>", " ", without_definitions(page))
    return html.unescape(re.sub(r"\s+", " ", text)) \
        .replace(" .", ".").replace(" ;", ";").replace(" :", ":")


def roofline_page(client, **query):
    r = client.get(url("/section/roofline", **query), headers=HX)
    assert r.status_code == 200
    return plain(text_of(r))


def chip_row(text, name):
    names = [h.name for h in HARDWARE]
    after = names[names.index(name) + 1] if name != names[-1] else "Per token"
    return re.search(re.escape(name) + r" (.*?) " + re.escape(after), text).group(1)


# --- the roofline's prefill verdict ------------------------------------------------------------

def llama3_costs(bits=16):
    p = published("Llama 3 8B")
    return p, model_costs(p.config, p.reported_params, 2, 2, weight_scheme(bits))


def test_prefill_of_128_tokens_is_memory_bound_on_every_chip(client):
    text = roofline_page(client, rf_model="Llama 3 8B", rf_bits=16, rf_len=128)
    p, c = llama3_costs()
    later = ", ".join(f"{compute_bound_from(c, h.peak_flops, h.bandwidth, p.config.n_ctx):,} "
                      f"tokens on {h.name}" for h in HARDWARE)
    assert ("For Llama 3 8B at 16 bits: at 128 tokens the prefill is memory-bound on every chip "
            f"listed; it becomes compute-bound from {later}.") in text
    assert "prefill of 128 tokens 119.8 FLOP/byte" in text
    for h in HARDWARE:
        assert re.search(r"\S+ \(memory\)", chip_row(text, h.name).split(" ", 1)[1])
    assert "it is compute-bound" not in text


def test_prefill_of_4096_tokens_is_compute_bound_on_every_chip(client):
    text = roofline_page(client, rf_model="Llama 3 8B", rf_bits=4, rf_len=4096)
    assert ("For Llama 3 8B at 4 bits: at 4,096 tokens the prefill is compute-bound on every chip "
            "listed.") in text


def test_prefill_verdict_names_each_side_when_the_chips_differ(client):
    text = roofline_page(client, rf_model="Llama 3 8B", rf_bits=16, rf_len=256)
    p, c = llama3_costs()
    bounds = {h.name: roofline(prefill_work(c, 256), h.peak_flops, h.bandwidth).bound
              for h in HARDWARE}
    compute = [n for n, b in bounds.items() if b == "compute"]
    memory = [n for n, b in bounds.items() if b == "memory"]
    assert compute and memory                       # this length splits the chips
    m = re.search(r"at 256 tokens the prefill is compute-bound on (.*?) and memory-bound on "
                  r"(.*?); it becomes compute-bound from (.*?)\.", text)
    assert m
    assert all(n in m.group(1) for n in compute) and all(n in m.group(2) for n in memory)
    assert m.group(3) == ", ".join(
        f"{compute_bound_from(c, h.peak_flops, h.bandwidth, p.config.n_ctx):,} tokens on "
        f"{h.name}" for h in HARDWARE if bounds[h.name] == "memory")


def test_decode_verdict_follows_the_table(client):
    text = roofline_page(client, rf_model="Llama 3.1 405B", rf_bits=4, rf_len=2048)
    assert "operations per byte: decoding one sequence is memory-bound on every chip." in text


# --- weight bytes: one formula for both sections -----------------------------------------------

@pytest.mark.parametrize("bits,label", [(16, "FP16"), (8, "INT8"), (4, "INT4")])
def test_roofline_and_quantization_show_the_same_weight_bytes(client, bits, label):
    from pipeline.roofline import INT4_GROUP
    p, c = llama3_costs(bits)
    expected = quantize.weight_memory(p.config, p.reported_params, weight_scheme(bits))
    assert c.weight_bytes == expected.total_bytes
    shown = f"{expected.total_bytes / 1e9:.2f} GB"
    assert f"{p.reported_params:,} parameters, {shown} of weights" in \
        roofline_page(client, rf_model="Llama 3 8B", rf_bits=bits)
    q = quantization_text(client, q_group=INT4_GROUP, q_bits=4)
    # the quantization section lists only the weight memory (the block section the counts)
    row = re.search(r"Llama 3 8B ([\d.]+ GB) ([\d.]+ GB) ([\d.]+ GB)", q)
    assert row.group(1 + ["FP16", "INT8", "INT4"].index(label)) == shown


def test_fits_uses_the_binary_gigabytes(client):
    # 16.06 GB of weights + 16 x 4096 tokens x 131,072 B of KV = 24.65e9 B: over 24e9, within
    # 24 GiB (25.77e9)
    p, c = llama3_costs(16)
    need = c.weight_bytes + 16 * 4096 * c.kv_bytes_per_token
    assert 24e9 < need <= 24 * 2 ** 30
    text = roofline_page(client, rf_model="Llama 3 8B", rf_bits=16, rf_len=4096, rf_batch=16)
    for name in ("NVIDIA L4", "NVIDIA RTX 4090"):
        assert "exceed" not in chip_row(text, name)
    text = roofline_page(client, rf_model="Llama 3 70B", rf_bits=16, rf_len=1024, rf_batch=1)
    assert "weights + KV cache exceed its 80 GiB" in chip_row(text, "NVIDIA H100 SXM")


def test_the_server_copy_is_said_in_mib(client):
    text = roofline_page(client)
    assert "(copying 256 MiB)" in text and "256 MB" not in text


# --- the generation loop's verdict --------------------------------------------------------------

@pytest.mark.parametrize("roof,prefill,decode", [
    (Machine(1e12, 1e9, "1"), "memory", "memory"),     # ridge 1000: nothing reaches it
    (Machine(1e11, 1e12, "1"), "compute", "compute"),  # ridge 0.1: everything passes it
])
def test_generation_verdict_follows_this_server_s_ridge(client, monkeypatch, roof, prefill,
                                                        decode):
    monkeypatch.setattr(generation, "machine", lambda: roof)
    prompt = f"Emma was {prefill} and {decode}"         # a prompt of its own for each roof
    text = plain(text_of(client.get(url("/section/generation", prompt=prompt), headers=HX)))
    m = re.search(r"On this server's roofline \(a ridge of ([\d.]+) operations per byte: "
                  r".*?\), the "
                  r"prefill of (\d+) tokens does ([\d.]+) operations per byte: (\w+)-bound"
                  r"( \(too few tokens to reuse each weight enough\))?; the decode step does "
                  r"([\d.]+): (\w+)-bound\.", text)
    assert m, text[text.find("The two phases"):][:900]
    assert float(m.group(1)) == pytest.approx(roof.peak_flops / roof.bandwidth, rel=1e-3)
    assert (m.group(4), m.group(7)) == (prefill, decode)
    assert bool(m.group(5)) == (prefill == "memory")
    assert "That is compute-bound" not in text


# --- quantization: the ratios, what stays in float, the window ---------------------------------

def quantization_text(c, **query):
    """The section with its "q-measured" disclosure open (its table is computed only then)."""
    r = c.get(url("/section/quantization", open="q-measured", **query), headers=HX)
    assert r.status_code == 200
    return plain(text_of(r))


def memory_column(text):
    return {name: int(b.replace(",", "")) for name, b in
            re.findall(r"(float32|int8|int4-g\d+) \([^)]*\) ([\d,]+) B", text)}


def test_quantization_lead_states_the_ratios_of_its_own_table(client, model):
    text = quantization_text(client, q_bits=4)      # the default is 3 bits: 4 one choice away
    mem = memory_column(text)
    int8, int4 = mem["float32"] / mem["int8"], mem["float32"] / mem["int4-g32"]
    assert (round(int8, 2), round(int4, 2)) == (2.25, 2.73)
    assert f"Weights' memory: {int8:.2f}× smaller with int8, {int4:.2f}× with int4-g32." in text
    assert (f"The memory shrinks {int8:.2f}× with int8 and {int4:.2f}× with int4-g32, "
            "not the 4× and 8× that 8 and 4 bits instead of 32 suggest") in text.replace(" ,", ",")
    assert "4 to 8 times" not in text
    kept = quantize.float_parameters(model) * 4
    assert f"{100 * kept / mem['float32']:.0f}% of the float32 model's bytes" in text
    assert ("Kept in float32: the token embedding (which this model also uses as its output "
            "layer) and the norms.") in text
    assert "windows of 256 tokens" in text


def test_quantization_text_follows_an_untied_model():
    from app import create_app
    m = get_model("llama_untied")
    assert not m.config.tied_embeddings and m.config.n_ctx < 256
    c = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                    "WARM_CACHES": False}).test_client()
    text = quantization_text(c, prompt="the cat sat")
    assert "also uses as its output layer" not in text
    assert "Kept in float32: the token embedding, the separate output layer and the norms" in text
    assert f"windows of {m.config.n_ctx} tokens" in text and "windows of 256" not in text
    mem = memory_column(text)
    assert f"memory shrinks {mem['float32'] / mem['int8']:.2f}× with int8" in text


# --- GPT-2's paper count ------------------------------------------------------------------------

def test_gpt2_paper_counts_are_not_claimed_to_be_reproduced(client):
    import pipeline.published as pub
    assert "left out" not in pub.__doc__
    for name, paper in (("GPT-2 small", 117), ("GPT-2 medium", 345), ("GPT-2 large", 762),
                        ("GPT-2 XL", 1542)):
        p = published(name)
        assert p.nominal == f"{paper}M (paper)"
        c = parameter_counts(p.config)
        assert c.total == p.reported_params
        for count in (c.total, c.total - c.positions, c.total - c.embedding,
                      c.total - c.positions - c.embedding):
            assert round(count / 1e6) != paper           # no count of the arrays gives it
    c = parameter_counts(published("GPT-2 small").config)
    text = plain(text_of(client.get(url("/section/block"), headers=HX)))
    assert (f"Counting the checkpoint's arrays does not give the paper's number: without the "
            f"position table they hold {c.total - c.positions:,}, without both embedding tables "
            f"{c.total - c.positions - c.embedding:,}. The paper does not say what it "
            "counted") in text
