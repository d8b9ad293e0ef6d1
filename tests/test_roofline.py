"""The roofline formulas (pipeline/roofline.py) on hand-checked numbers, published configs and
the live model's KV cache."""
import numpy as np
import pytest

from pipeline.published import published
from pipeline.roofline import (
    HARDWARE,
    Work,
    attainable,
    decode_work,
    hardware,
    model_costs,
    prefill_work,
    roof_curve,
    roofline,
)


def test_roofline_takes_the_slower_of_compute_and_memory():
    est = roofline(Work(flops=1e12, bytes=1e9, tokens=10), peak_flops=1e14, bandwidth=1e12)
    assert est.seconds == pytest.approx(1e-2) and est.bound == "compute"
    assert est.tokens_per_second == pytest.approx(1000)
    est = roofline(Work(flops=1e9, bytes=1e9, tokens=1), peak_flops=1e14, bandwidth=1e12)
    assert est.seconds == pytest.approx(1e-3) and est.bound == "memory"
    assert est.attainable_flops == pytest.approx(1e12)       # intensity 1 x 1e12 B/s


def test_roof_curve_bends_at_the_ridge():
    h = hardware("NVIDIA A100 SXM 80GB")
    xs, ys = roof_curve(h.peak_flops, h.bandwidth, 0.1, 1e4, 41)
    assert xs[0] == pytest.approx(0.1) and xs[-1] == pytest.approx(1e4)
    assert np.allclose(np.diff(np.log10(xs)), 5 / 40)                  # log-spaced
    below, above = xs < h.ridge, xs >= h.ridge
    assert np.allclose(ys[below], xs[below] * h.bandwidth)              # memory-bound slope
    assert np.all(ys[above] == h.peak_flops)                            # flat compute roof
    # the same as one point
    for x, y in zip(xs, ys, strict=True):
        assert attainable(float(x), h.peak_flops, h.bandwidth) == pytest.approx(y)


def test_llama3_8b_costs_by_hand():
    p = published("Llama 3 8B")
    c = model_costs(p.config, p.reported_params, 2, 2)
    # untied: the 128256 x 4096 embedding table is a lookup, the unembedding a product
    assert c.matmul_params == 8_030_261_248 - 128256 * 4096
    assert c.weight_bytes == 2 * 8_030_261_248
    assert c.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2            # K and V, 32 layers, 8 heads
    assert c.attn_flops_per_pair == 4 * 32 * 32 * 128
    d = decode_work(c, context=0, batch=1)
    assert d.flops == 2 * c.matmul_params + c.attn_flops_per_pair
    assert d.bytes == c.weight_bytes + c.kv_bytes_per_token
    assert 0.9 < d.intensity < 1.0         # ~1 operation per byte at 16-bit weights
    h100 = hardware("NVIDIA H100 SXM")
    est = roofline(d, h100.peak_flops, h100.bandwidth)
    assert est.bound == "memory"
    assert est.tokens_per_second == pytest.approx(3350e9 / d.bytes)


def test_gpt2_tied_and_learned_positions():
    p = published("GPT-2 small")
    c = model_costs(p.config, p.reported_params, 4, 4)
    assert c.matmul_params == 124_439_808 - 1024 * 768     # the tied table is multiplied
    assert c.kv_bytes_per_token == 2 * 12 * 12 * 64 * 4


def test_batching_and_long_prompts_raise_the_intensity():
    p = published("Llama 3.1 70B")
    c = model_costs(p.config, p.reported_params, 2, 2)
    decode = [decode_work(c, 1024, b).intensity for b in (1, 2, 8, 64, 256)]
    prefill = [prefill_work(c, n).intensity for n in (1, 16, 256, 4096)]
    assert decode == sorted(decode) and prefill == sorted(prefill)
    a100 = hardware("NVIDIA A100 SXM 80GB")
    assert roofline(prefill_work(c, 4096), a100.peak_flops, a100.bandwidth).bound == "compute"
    assert roofline(decode_work(c, 4096, 1), a100.peak_flops, a100.bandwidth).bound == "memory"
    assert prefill_work(c, 1).flops == decode_work(c, 0, 1).flops


def test_kv_bytes_per_token_is_what_the_engines_cache_holds(model):
    c = model_costs(model.config, model.n_params(), 4, 4)
    kv = model.new_kv_cache()
    model.prefill(model.tokenizer.encode("It is a truth universally acknowledged"), kv)
    assert c.kv_bytes_per_token * len(kv) == kv.nbytes


def test_hardware_table_is_consistent():
    for h in HARDWARE:
        assert h.ridge == h.peak_flops / h.bandwidth
        assert 50 < h.ridge < 1000
    with pytest.raises(KeyError):
        hardware("TPU v9")


def test_weight_bytes_are_the_quantization_sections_formula():
    from pipeline.quantize import INT8, int4, weight_memory
    from pipeline.roofline import INT4_GROUP, weight_scheme
    p = published("Llama 3 8B")
    for bits, scheme in ((16, None), (8, INT8), (4, int4(INT4_GROUP))):
        assert weight_scheme(bits) == scheme
        c = model_costs(p.config, p.reported_params, 2, 2, weight_scheme(bits))
        assert c.weight_bytes == weight_memory(p.config, p.reported_params, scheme).total_bytes
    # 16 bits: every weight 2 bytes; int4: more than params x 4 / 8 (scales, zero points and
    # the 16-bit embeddings), which was the 4.02 GB this used to say
    assert model_costs(p.config, p.reported_params, 2, 2).weight_bytes == 2 * p.reported_params
    int4_bytes = model_costs(p.config, p.reported_params, 2, 2, weight_scheme(4)).weight_bytes
    assert int4_bytes > p.reported_params * 4 / 8 + 1e9
    assert round(int4_bytes / 1e9, 2) == 5.73
    with pytest.raises(ValueError):
        weight_scheme(5)


def test_compute_bound_from_is_the_first_compute_bound_prompt_length():
    from pipeline.roofline import compute_bound_from
    p = published("Llama 3 8B")
    c = model_costs(p.config, p.reported_params, 2, 2)
    for h in HARDWARE:
        n = compute_bound_from(c, h.peak_flops, h.bandwidth, p.config.n_ctx)
        assert n is not None and 1 < n < p.config.n_ctx
        assert roofline(prefill_work(c, n), h.peak_flops, h.bandwidth).bound == "compute"
        assert roofline(prefill_work(c, n - 1), h.peak_flops, h.bandwidth).bound == "memory"
        assert prefill_work(c, n).intensity >= h.ridge > prefill_work(c, n - 1).intensity
    # 128 tokens: memory-bound on every chip (119.8 FLOP/byte, below every ridge)
    assert all(roofline(prefill_work(c, 128), h.peak_flops, h.bandwidth).bound == "memory"
               for h in HARDWARE)
    assert prefill_work(c, 128).intensity == pytest.approx(119.8, abs=0.05)
    # a ridge the context window never reaches
    assert compute_bound_from(c, 1e18, 1e9, p.config.n_ctx) is None
    assert compute_bound_from(c, 1e9, 1e18, p.config.n_ctx) == 1


def test_memory_capacities_are_the_data_sheets_binary_gigabytes():
    import re
    for h in HARDWARE:
        m = re.search(r"(\d+) ?GB (?:GDDR6X?|HBM\w*) \((\d+) GiB\)", h.source)
        assert m, h.source
        assert m.group(1) == m.group(2)                 # the sheet's "GB" of DRAM is GiB
        assert h.memory == int(m.group(2)) * 2 ** 30
    assert hardware("NVIDIA H100 SXM").memory == 80 * 1024 ** 3 == 85_899_345_920


def test_the_machine_copy_is_256_mib():
    import inspect

    from pipeline.roofline import Machine, measure_machine
    assert inspect.signature(measure_machine).parameters["copy_bytes"].default == 256 * 2 ** 20
    assert "256 MiB" in inspect.getsource(Machine)
