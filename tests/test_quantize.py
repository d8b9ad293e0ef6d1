"""Quantization: every weight within half a step of its original, storage bytes equal to the
formula and to hand arithmetic, the dequantized model runs through the engine, and the shapes
the calculator uses for published configs add up to their published parameter counts."""
import math
import os

import numpy as np
import pytest

from pipeline import load_model, quantize
from pipeline.generation import decode_loop
from pipeline.published import PUBLISHED
from pipeline.sizes import parameter_counts
from web_support import has_default_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "models")
SCHEMES = [quantize.INT8, quantize.int4(32), quantize.int4(64), quantize.int4(128),
           quantize.grouped(3, 32), quantize.grouped(3, 128)]


@pytest.fixture(scope="module")
def austen():
    if not has_default_model():
        pytest.skip("models/austen/model.safetensors is missing")
    return load_model(None)


def awkward_matrix(d_in=256, d_out=24, seed=0):
    """Normal weights plus the cases that break careless quantizers: an outlier, an all-positive
    group, an all-negative column, an all-zero column, a tiny-valued column."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.05, (d_in, d_out)).astype(np.float32)
    w[7, 0] = 1.7                                   # outlier
    w[:32, 1] = np.abs(w[:32, 1]) + 0.2             # a group with no negative weight
    w[:, 2] = -np.abs(w[:, 2]) - 0.01               # a column with no positive weight
    w[:, 3] = 0.0                                   # nothing to scale
    w[:, 4] *= 1e-4                                 # scales in float16's subnormal range
    return w


@pytest.mark.parametrize("s", SCHEMES, ids=lambda s: s.name)
def test_every_weight_within_half_a_step(s, austen):
    matrices = {"awkward": awkward_matrix()} | quantize.linear_weights(austen.params)
    for name, w in matrices.items():
        qm = quantize.quantize_matrix(w, s)
        error = np.abs(w - qm.dequantize())
        half_step = qm.step_sizes() / 2
        # float32 rounding in w / scale can add a few ulps; nothing more
        assert (error <= half_step * (1 + 1e-6) + 1e-12).all(), (name, (error / half_step).max())
        codes = qm.code_values()
        assert codes.min() >= (1 if s.symmetric else 0) and codes.max() <= s.levels - 1


def test_int8_largest_weight_of_each_channel_uses_the_end_code():
    w = awkward_matrix()
    qm = quantize.quantize_matrix(w, quantize.INT8)
    q = qm.code_values().astype(int) - 128                              # [d_in, d_out]
    biggest = np.abs(w).argmax(0)
    ends = np.abs(q[biggest, np.arange(w.shape[1])])
    normal = qm.scales[0] >= np.finfo(np.float16).tiny       # not a subnormal float16 scale
    normal &= np.abs(w).max(0) > 0                              # the zero column has no end
    assert normal.sum() == w.shape[1] - 2
    # the scale was rounded up to a float16 (11 significant bits), so the largest weight lands
    # on 126 or 127; a subnormal scale has fewer bits and may lose a few more codes
    assert (ends[normal] >= 126).all() and (ends <= 127).all()
    assert (qm.scales.astype(np.float32)[0] >= np.abs(w).max(0) / 127).all()


@pytest.mark.parametrize("s", SCHEMES, ids=lambda s: s.name)
def test_dequantized_values_are_levels_of_their_group(s):
    w = awkward_matrix(seed=3)
    qm = quantize.quantize_matrix(w, s)
    deq = qm.dequantize()
    g = w.shape[0] // qm.scales.shape[0]
    last = qm.scales.shape[0] - 1
    for group, column in [(0, 0), (0, 1), (last, 2), (0, 3), (last, 5)]:
        levels = qm.levels(group, column)
        assert len(levels) == s.levels - (1 if s.symmetric else 0)
        values = deq[group * g:(group + 1) * g, column]
        assert np.isin(values, levels).all()
        assert (np.diff(levels) > 0).all() and 0 in levels     # zero is always representable


@pytest.mark.parametrize("s", SCHEMES[1:], ids=lambda s: s.name)
def test_a_shorter_last_group(s):
    w = awkward_matrix(d_in=s.group_size * 3 // 2, d_out=5, seed=4)   # a group and a half
    qm = quantize.quantize_matrix(w, s)
    assert qm.scales.shape == (2, 5)
    # codes and 10 zero points of s.bits bits each, each array rounded up to whole bytes
    assert (qm.nbytes == -(-w.size * s.bits // 8) + 10 * 2 + -(-10 * s.bits // 8)
            == quantize.quantized_bytes(w.size, 10, s))
    assert (np.abs(w - qm.dequantize()) <= qm.step_sizes() / 2 * (1 + 1e-6)).all()
    # the short group's scale comes from its own weights only
    short = w[s.group_size:, 0]
    lo, hi = min(short.min(), 0), max(short.max(), 0)
    assert float(qm.scales[1, 0]) == pytest.approx((hi - lo) / (2 ** s.bits - 1), rel=1e-3)


def test_nibbles_pack_two_to_a_byte_and_come_back():
    codes = np.random.default_rng(1).integers(0, 16, 11).astype(np.uint8)   # odd: one pad
    packed = quantize.pack_nibbles(codes)
    assert packed.nbytes == 6
    assert (quantize.unpack_nibbles(packed, 11) == codes).all()
    assert packed[0] == codes[0] | (codes[1] << 4)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 11, 1001])
def test_three_bit_codes_pack_eight_to_three_bytes_and_come_back(n):
    codes = np.random.default_rng(n).integers(0, 8, n).astype(np.uint8)
    packed = quantize.pack_bits(codes, 3)
    assert packed.nbytes == -(-n * 3 // 8)               # no byte more than the bits need
    assert (quantize.unpack_bits(packed, n, 3) == codes).all()
    if n >= 3:                                           # code i at bit 3 i, little-endian
        assert packed[0] == (codes[0] | (codes[1] << 3) | (codes[2] << 6)) & 0xFF


def packed_by_hand(codes, bits) -> bytes:
    """The layout pack_bits promises, one bit at a time: code i's bit j is bit bits*i + j of
    the stream, bit k of the stream is bit k % 8 of byte k // 8."""
    out = bytearray(-(-len(codes) * bits // 8))
    for i, c in enumerate(int(c) for c in codes):
        for j in range(bits):
            if c >> j & 1:
                k = bits * i + j
                out[k // 8] |= 1 << (k % 8)
    return bytes(out)


@pytest.mark.parametrize("bits", [1, 2, 3, 5, 6, 7])
@pytest.mark.parametrize("n", [1, 8, 13, 64, 203])
def test_packed_codes_are_the_bit_stream_and_come_back(bits, n):
    codes = np.random.default_rng(bits * 1000 + n).integers(0, 2 ** bits, n).astype(np.uint8)
    codes[0] = 2 ** bits - 1                             # every bit of a code set
    packed = quantize.pack_bits(codes, bits)
    assert packed.dtype == np.uint8 and packed.tobytes() == packed_by_hand(codes, bits)
    assert (quantize.unpack_bits(packed, n, bits) == codes).all()


# --- bytes -------------------------------------------------------------------------------------

def test_bytes_of_one_matrix_by_hand():
    w = np.zeros((768, 256), dtype=np.float32) + 0.01      # austen's w_down shape
    # int8, per output channel: 768*256 one-byte codes + 256 float16 scales
    assert quantize.quantize_matrix(w, quantize.INT8).nbytes == 768 * 256 + 256 * 2 == 197_120
    # int4, groups of 32: half a byte per weight, 24*256 groups of a 2-byte scale + a 4-bit zero
    assert (quantize.quantize_matrix(w, quantize.int4(32)).nbytes
            == 98_304 + 6_144 * 2 + 3_072 == 113_664)
    # int4, groups of 128: 6*256 groups
    assert (quantize.quantize_matrix(w, quantize.int4(128)).nbytes
            == 98_304 + 1_536 * 2 + 768 == 102_144)
    # int3, groups of 32: three eighths of a byte per weight and per zero point
    assert (quantize.quantize_matrix(w, quantize.grouped(3, 32)).nbytes
            == 73_728 + 6_144 * 2 + 2_304 == 88_320)


@pytest.mark.parametrize("s", SCHEMES, ids=lambda s: s.name)
def test_model_bytes_equal_the_formula_and_the_arrays(s, austen):
    qmodel = quantize.quantize_model(austen, s)
    for _name, qm in qmodel.matrices.items():
        d_in, d_out = qm.shape
        groups = quantize.n_groups(d_in, d_out, s)
        assert qm.nbytes == quantize.quantized_bytes(d_in * d_out, groups, s)
        assert qm.nbytes == qm.codes.nbytes + qm.scales.nbytes + qm.zeros.nbytes
    memory = quantize.weight_memory(austen.config, austen.n_params(), s, float_bits=32)
    assert memory.linear_bytes == qmodel.matrix_bytes
    assert memory.total_bytes == qmodel.nbytes
    # what stays float32: the tied embedding (4096 x 256), 9 norm vectors of 256
    assert qmodel.float_bytes == 4 * (4096 * 256 + 9 * 256)
    float32 = quantize.weight_memory(austen.config, austen.n_params(), None, float_bits=32)
    assert float32.total_bytes == 4 * austen.n_params() == 16_262_144


@pytest.mark.parametrize("name", ["llama_mha", "llama_gqa", "llama_untied", "gpt2"])
def test_linear_shapes_are_the_loaded_matrices(name, austen):
    for model in (load_model(os.path.join(FIXTURES, name)), austen):
        loaded = quantize.linear_weights(model.params)
        shapes = quantize.linear_shapes(model.config)
        expected = {f"blocks.{i}.{n}": (d_in, d_out)
                    for n, d_in, d_out, count in shapes for i in range(count)}
        assert {k: w.shape for k, w in loaded.items()} == expected


@pytest.mark.parametrize("p", PUBLISHED, ids=lambda p: p.name)
def test_linear_weights_of_published_configs_match_the_parameter_count(p):
    """The calculator's linear layers are the blocks' weight matrices of pipeline.sizes'
    breakdown: its attention and feed-forward counts minus their biases (GPT-2 only)."""
    c = p.config
    counts = parameter_counts(c)
    n_linear = quantize.weight_memory(c, counts.total).n_linear
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    biases = q + 2 * kv + c.d_model + c.d_ff + c.d_model if c.model_type == "gpt2" else 0
    assert n_linear == c.n_layers * (counts.attention + counts.ffn - biases)
    assert counts.total == p.reported_params


def test_weight_memory_of_llama3_8b_by_hand():
    p = next(p for p in PUBLISHED if p.name == "Llama 3 8B")
    fp16 = quantize.weight_memory(p.config, p.reported_params)
    assert fp16.total_bytes == 2 * 8_030_261_248
    int4 = quantize.weight_memory(p.config, p.reported_params, quantize.int4(128))
    n_linear = 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336)
    assert int4.n_linear == n_linear
    groups = n_linear // 128
    assert int4.total_bytes == n_linear // 2 + groups * 2 + groups // 2 \
        + (8_030_261_248 - n_linear) * 2


# --- the quantized model runs through the engine ----------------------------------------------

def test_dequantized_model_is_the_engine_with_other_weights(austen):
    qmodel = quantize.quantize_model(austen, quantize.int4(64))
    assert qmodel.model.config == austen.config
    assert qmodel.model.params["wte"] is austen.params["wte"]       # embeddings untouched
    w = qmodel.model.params["blocks"][2]["mlp"]["w_up"]
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w, qmodel.matrices["blocks.2.mlp.w_up"].dequantize())
    ids = austen.tokenizer.encode_ordinary("Mr. Darcy bowed.")
    assert quantize.max_logit_change(austen.forward(ids), qmodel.model.forward(ids)) > 0


def test_heldout_perplexity_is_exp_of_the_mean_nll(austen):
    text = open(os.path.join(ROOT, "data", "heldout_pride_and_prejudice_ch10.txt")).read()
    windows = quantize.heldout_windows(austen.tokenizer, text, 2, 100)
    assert [len(t) for _, t in windows] == [100, 100]
    ids = austen.tokenizer.encode_ordinary(text)
    assert list(windows[1][0]) == ids[100:200] and list(windows[1][1]) == ids[101:201]
    result = quantize.heldout_perplexity(austen, windows)
    logp = []
    for inputs, targets in windows:   # an independent route: float64 log of the softmax
        z = austen.forward(inputs).astype(np.float64)
        probs = np.exp(z - z.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        logp.extend(np.log(probs[np.arange(len(targets)), targets]))
    assert result.n_tokens == 200
    assert math.isclose(result.perplexity, math.exp(-np.mean(logp)), rel_tol=1e-9)


def test_metrics():
    a = np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 1.0]], dtype=np.float32)
    b = np.array([[1.0, 1.5, 1.9], [3.0, 0.5, 1.0]], dtype=np.float32)
    assert quantize.max_logit_change(a, b) == pytest.approx(1.9)
    assert quantize.top1_agreement(a, b) == 0.5


def test_scheme_names():
    assert quantize.scheme("int4-g64") == quantize.int4(64)
    assert quantize.scheme("int3-g32") == quantize.grouped(3, 32)
    assert quantize.scheme("int8") is quantize.INT8
    for bad in ("int4-g48", "int3", "int4-gx", "int2-g32", "int5-g32"):
        with pytest.raises(ValueError):
            quantize.scheme(bad)


@pytest.mark.parametrize("name", ["gpt2", "llama_untied", "llama_gqa"])
def test_other_architectures_quantize_and_run(name):
    """GPT-2 (biases stay float) and an untied output layer (stays float); 48 inputs do not
    split into groups of 32, so every column ends in a shorter group."""
    model = load_model(os.path.join(FIXTURES, name))
    qmodel = quantize.quantize_model(model, quantize.int4(32))
    assert qmodel.nbytes == quantize.weight_memory(model.config, model.n_params(),
                                                   quantize.int4(32), float_bits=32).total_bytes
    if "b_q" in model.params["blocks"][0]["attn"]:
        assert qmodel.model.params["blocks"][0]["attn"]["b_q"] is \
            model.params["blocks"][0]["attn"]["b_q"]
    assert qmodel.model.params["unembed"] is model.params["unembed"]
    for name_, qm in qmodel.matrices.items():
        w = quantize.linear_weights(model.params)[name_]
        assert (np.abs(w - qm.dequantize()) <= qm.step_sizes() / 2 * (1 + 1e-6)).all()
    logits = qmodel.model.forward([1, 2, 3, 4])
    assert logits.dtype == np.float32 and np.isfinite(logits).all()


def test_levels_histogram_counts_every_weight_over_a_range_that_holds_every_level():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 8)).astype(np.float32) * 0.02
    qm = quantize.quantize_matrix(w, quantize.int4(32))
    col, levels = w[:32, 5], qm.levels(0, 5)
    counts, edges = quantize.levels_histogram(col, levels, bins=40)
    assert counts.sum() == len(col) and len(edges) == 41
    assert edges[0] == min(col.min(), levels.min()) and edges[-1] == max(col.max(), levels.max())
    # each weight is counted in the bin that holds it
    assert np.array_equal(counts, [((col >= a) & ((col < b) if i < 39 else (col <= b))).sum()
                                   for i, (a, b)
                                   in enumerate(zip(edges[:-1], edges[1:], strict=True))])


# --- a big model's path: dequantized on the fly, greedy checked in one pass --------------------

def engine_model(name):
    from engine_support import get_model
    return get_model(name)


ON_THE_FLY_MODELS = ["default", "gguf_llama_q4_1", "gguf_gpt2_q8_0"]


@pytest.mark.parametrize("name", ON_THE_FLY_MODELS)
@pytest.mark.parametrize("s", [quantize.INT8, quantize.int4(32), quantize.grouped(3, 32)],
                         ids=lambda s: s.name)
def test_on_the_fly_is_the_held_copy_bit_for_bit(name, s):
    model = engine_model(name)
    held = quantize.quantize_model(model, s)
    lazy = quantize.quantize_model(model, s, on_the_fly=True)
    assert isinstance(lazy.model.params["blocks"], quantize.DequantizedOnTheFly)
    assert lazy.nbytes == held.nbytes
    ids = list(range(1, min(20, model.config.n_ctx)))
    np.testing.assert_array_equal(lazy.model.forward(ids), held.model.forward(ids))
    np.testing.assert_array_equal(lazy.model.forward(ids, n_layers=1),    # a slice of blocks
                                  held.model.forward(ids, n_layers=1))
    assert ([p.token for p in decode_loop(lazy.model, ids[:5], 6)]
            == [p.token for p in decode_loop(held.model, ids[:5], 6)])
    for i, block in enumerate(lazy.model.params["blocks"]):
        for part in ("attn", "mlp"):
            for k, w in block[part].items():
                np.testing.assert_array_equal(w, held.model.params["blocks"][i][part][k])


@pytest.mark.parametrize("name", ["default", "gguf_llama_q4_1"])
@pytest.mark.parametrize("s", [quantize.INT8, quantize.int4(64), quantize.grouped(3, 32)],
                         ids=lambda s: s.name)
def test_a_scheme_kept_as_arrays_is_the_quantized_model_bit_for_bit(name, s):
    """scheme_arrays (what the web app keeps on disk for a big model) read back through
    model_from_arrays is quantize_model's model: the same codes, scales, zero points, weights,
    bytes and logits."""
    model = engine_model(name)
    held = quantize.quantize_model(model, s)
    arrays = quantize.scheme_arrays(model, s)
    back = quantize.model_from_arrays(model, s, arrays)
    assert back.nbytes == held.nbytes and set(back.matrices) == set(held.matrices)
    for k, m in held.matrices.items():
        for field in ("codes", "scales", "zeros"):
            np.testing.assert_array_equal(getattr(back.matrices[k], field), getattr(m, field))
    for k, w in quantize.linear_weights(held.model.params).items():
        np.testing.assert_array_equal(quantize.linear_weights(back.model.params)[k], w)
    ids = list(range(1, min(20, model.config.n_ctx)))
    np.testing.assert_array_equal(back.model.forward(ids), held.model.forward(ids))
    assert quantize.weight_change(model, back) == quantize.weight_change(model, held)


def test_dequantize_is_the_float32_formula_bit_for_bit():
    for s in SCHEMES:
        for w in (awkward_matrix(), awkward_matrix(d_in=100, d_out=7, seed=5)):
            qm = quantize.quantize_matrix(w, s)
            codes = qm.code_values().astype(np.float32)
            by_formula = (codes - qm.per_weight(qm.zero_points())) * qm.step_sizes()
            assert np.array_equal(qm.dequantize().view(np.int32), by_formula.view(np.int32))


@pytest.mark.parametrize("name", ON_THE_FLY_MODELS)
def test_greedy_by_checking_is_greedy(name):
    model = engine_model(name)
    qmodel = quantize.quantize_model(model, quantize.int4(32), on_the_fly=True).model
    rng = np.random.default_rng(0)
    for prompt in ([5, 9, 14], list(range(30, 42))):
        want = [p.token for p in decode_loop(qmodel, prompt, 10)]
        float_guess = [p.token for p in decode_loop(model, prompt, 10)]
        for guess in (float_guess, want, [], list(rng.integers(0, model.config.vocab_size, 9))):
            tokens, logits = quantize.greedy_by_checking(qmodel, prompt, 10, guess)
            assert tokens == want
            np.testing.assert_allclose(logits[:len(prompt)], qmodel.forward(prompt),
                                       rtol=1e-5, atol=1e-4)


def test_greedy_by_checking_stops_where_generate_stops(austen):
    eos = austen.config.eos_token_id
    prompt = austen.tokenizer.encode_ordinary("Mr. Darcy")
    tokens, _ = quantize.greedy_by_checking(austen, prompt, 3, [eos, 7, 8])
    assert tokens == [p.token for p in decode_loop(austen, prompt, 3)]
    full = list(range(1, austen.config.n_ctx))      # one position left: two tokens, then full
    tokens, _ = quantize.greedy_by_checking(austen, full, 5, [1, 2, 3])
    assert tokens == [p.token for p in decode_loop(austen, full, 5)] and len(tokens) == 2


# --- a GGUF file's blocks, by hand ------------------------------------------------------------

@pytest.mark.parametrize("type_name", ["Q4_1", "Q8_0"])
def test_decode_block_is_gguf_dequantize(type_name):
    import gguf
    t = gguf.GGMLQuantizationType[type_name]
    x = np.random.default_rng(2).normal(0, 0.3, (4, 64)).astype(np.float32)
    x[1, :32] = np.abs(x[1, :32]) + 0.5                  # a block with no negative weight
    raw = gguf.quants.quantize(x, t)                     # uint8 [4, 2 blocks x block bytes]
    want = gguf.quants.dequantize(raw, t).reshape(-1)
    size = quantize.BLOCK_FORMATS[type_name][1]
    blocks = raw.reshape(-1, size)
    for k, block in enumerate(blocks):
        got = quantize.decode_block(type_name, block.tobytes())
        np.testing.assert_array_equal(got.weights, want[32 * k:32 * (k + 1)])
        assert got.raw == block.tobytes() and len(got.codes) == 32
        if type_name == "Q4_1":
            assert got.codes.min() >= 0 and got.codes.max() <= 15
            np.testing.assert_array_equal(got.weights, got.d * got.codes + got.m)
        else:
            assert got.m is None and got.codes.min() >= -128 and got.codes.max() <= 127
    with pytest.raises(ValueError):
        quantize.decode_block("Q4_1", bytes(19))
    with pytest.raises(ValueError):
        quantize.decode_block("Q4_K", bytes(144))


@pytest.mark.parametrize("name", ["gguf_llama_q4_1", "gguf_gpt2_q8_0"])
def test_stored_blocks_are_the_engines_weights(name):
    """Every block of every stored matrix (q and k rows un-permuted, GPT-2's fused q|k|v split,
    a separate output layer) decodes to the weights the engine computes with."""
    from pipeline.gguf_file import read_stored_bytes
    model = engine_model(name)
    checked = 0
    for path, st in model.stored.items():
        if len(st.shape) != 2:
            continue
        data = read_stored_bytes(model.path, st)
        n_blocks = st.n_bytes // st.block_bytes
        for k in range(n_blocks):
            block = quantize.decode_block(
                st.type_name, data[k * st.block_bytes:(k + 1) * st.block_bytes])
            engine = quantize.engine_block_weights(model, path, k)
            np.testing.assert_array_equal(block.weights, engine, err_msg=f"{path} block {k}")
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("name", ["gguf_llama_q4_1", "gguf_gpt2_q8_0"])
def test_stored_type_counts_are_the_files(name):
    import gguf
    model = engine_model(name)
    counts = {}
    for t in gguf.GGUFReader(model.path).tensors:
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    assert quantize.stored_type_counts(model) == counts
    assert list(quantize.stored_type_counts(model).values()) == sorted(counts.values(),
                                                                       reverse=True)


def test_weight_change_of_a_lossless_scheme():
    """Weights already on an int8 grid come back exactly; the RMS change is measured."""
    model = engine_model("gguf_llama_q4_1")
    once = quantize.quantize_model(model, quantize.INT8)
    again = quantize.quantize_model(once.model, quantize.INT8)
    change = quantize.weight_change(once.model, again)
    assert change["n_weights"] == sum(w.size for w in
                                      quantize.linear_weights(model.params).values())
    first = quantize.weight_change(model, once)
    assert 0 < first["relative_rms"] < 0.01
    assert change["relative_rms"] <= first["relative_rms"]
    # the same whether the quantized weights are held or dequantized block by block
    assert quantize.weight_change(model, quantize.quantize_model(
        model, quantize.INT8, on_the_fly=True)) == first
    weights = quantize.linear_weights(model.params)
    backs = {k: once.matrices[k].dequantize() for k in weights}   # by the definition
    assert first["unchanged"] == sum(int((backs[k] == w).sum())
                                     for k, w in weights.items()) / change["n_weights"]
