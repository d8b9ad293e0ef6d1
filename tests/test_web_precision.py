"""How the numbers are stored, told once (the generation loop's "How the numbers are stored",
web/presentation/precision.py): the file's tensor types and bytes as the file itself says them, the
engine's
float32 copy (parameters x 4 bytes), the KV cache's bytes per token in float32 here and in fp16 in
the table of published models; the places that cite it refer to it; Quantization says what it
quantizes and why its compression ratio is not 32 / bits."""
import json
import re

import numpy as np

from pipeline.loader import WEIGHTS_FILE
from pipeline.published import PUBLISHED
from web.presentation.precision import storage
from web_support import HX, reading_text, text_of, url


def safetensors_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def test_the_default_model_s_file_is_read_from_its_header(model):
    header = safetensors_header(f"{model.path}/{WEIGHTS_FILE}")
    st = storage(model)
    assert [t.name for t in st.types] == sorted({h["dtype"] for h in header.values()})
    assert st.file_bytes == sum(h["data_offsets"][1] - h["data_offsets"][0]
                                for h in header.values())
    assert sum(t.n_tensors for t in st.types) == len(header)
    assert sum(t.n_weights for t in st.types) == st.n_params == model.n_params()
    assert st.all_float32 and st.file_bits == 32 and st.float32_bytes == st.file_bytes
    cfg = model.config
    assert st.kv_float32 == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4
    assert st.kv_fp16 * 2 == st.kv_float32


def test_smollm2_s_file_types_are_the_gguf_reader_s(smollm2):
    """Each type's bits per weight from the file's own tensors (GGUFReader), not typed in: Q4_1
    is 20 bytes per block of 32 weights, 5 bits a weight."""
    from gguf import GGUFReader
    reader = GGUFReader(smollm2.path)
    expect = {}
    for t in reader.tensors:
        row = expect.setdefault(t.tensor_type.name, [0, 0, 0])
        row[0] += 1
        row[1] += int(t.n_elements)
        row[2] += int(t.n_bytes)
    st = storage(smollm2)
    assert {t.name: [t.n_tensors, t.n_weights, t.n_bytes] for t in st.types} == expect
    q4_1 = next(t for t in st.types if t.name == "Q4_1")
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType.Q4_1]
    assert q4_1.bits == 8 * size / block == 5.0
    assert st.types[0] is q4_1                      # most weights first
    assert st.n_params == smollm2.n_params() == sum(t.n_weights for t in st.types)
    assert st.float32_bytes == 4 * smollm2.n_params()
    assert round(st.float32_bytes / 1e6, 1) == 538.1
    assert (st.kv_float32, st.kv_fp16) == (46_080, 23_040)
    # the real-models table's SmolLM 135M (the same architecture) keeps the fp16 figure
    smol = next(p for p in PUBLISHED if p.name == "SmolLM 135M")
    cfg = smol.config
    assert 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 2 == st.kv_fp16


def precision_paragraph(page: str) -> str:
    m = re.search(r'<p id="gen-precision">(.*?)</p>', page, re.S)
    assert m, "no “How the numbers are stored” paragraph"
    return m.group(1)


def check_paragraph(page: str, st) -> str:
    p = precision_paragraph(page)
    text = reading_text(p)
    assert st.file_name in text
    for t in st.types:
        assert re.search(rf"{t.n_tensors} tensors? as {re.escape(t.name)} \({t.bits:g} bits "
                         r"per weight\)", text), (t, text)
    assert f"{st.file_bytes:,} B" in text
    assert f"{st.n_params:,} parameters × 4 bytes = {st.float32_bytes / 1e6:.1f} MB" in text
    assert f"{st.kv_float32:,} B per token" in text and f"{st.kv_fp16:,} B per token" in text
    # the KV cache's bytes per token answer the KV cache's question: blurred until then
    assert p.count('data-answer-of="kv-bytes"') == 2
    for m in re.finditer(r'data-answer-of="kv-bytes" data-answer="(\d+)">(.*?)</span>', p, re.S):
        assert int(m.group(1)) == st.kv_float32
    return text


def test_the_generation_loop_tells_how_the_default_model_is_stored(client, model):
    page = text_of(client.get(url("/section/generation", open="gen-prefill"), headers=HX))
    st = storage(model)
    text = check_paragraph(page, st)
    assert "uses those numbers as they are" in text and "safetensors" in text
    # the table's "bytes moved" and the counts cite the copy, not another figure
    assert "parameters in its float32 copy (above)" in reading_text(page)


def test_the_generation_loop_tells_how_smollm2_is_stored(smol_app, smollm2):
    with smol_app.app_context():
        c = smol_app.test_client()
        page = text_of(c.get(url("/section/generation", model="smollm2", open="gen-prefill",
                                 gen_max=2), headers=HX))

        st = storage(smollm2)
        text = check_paragraph(page, st)
        assert f"{st.file_bits:.2f} bits per parameter on average" in text
        assert "dequantizes every tensor once into a float32 copy" in text
        # Quantization says what it re-quantizes, and refers to the paragraph
        q = reading_text(text_of(c.get(url("/section/quantization", model="smollm2"),
                                       headers=HX)))
        assert "What this section quantizes is the engine's float32 copy, dequantized from " \
               "the file (see “How the numbers are stored” in the generation loop)" in q
        assert "210 tensors as Q4_1" in q


def test_the_kv_cache_and_the_roofline_refer_to_it(client, model):
    kv = reading_text(text_of(client.get(url("/section/kvcache", open="kv-real"), headers=HX)))
    assert "float32 numbers, like the engine's copy of the weights: see “How the numbers are " \
           "stored” in the generation loop" in kv
    assert "this engine's cache is float32 for its NumPy math" in kv
    rf = reading_text(text_of(client.get(url("/section/roofline", open="rf-chips"), headers=HX)))
    st = storage(model)
    assert f"({st.float32_bytes / 1e6:.1f} MB: its float32 copy of the weights, see “How the " \
           "numbers are stored” in the generation loop)" in rf


def test_quantization_s_core_says_why_the_ratio_is_not_32_over_bits(client, model):
    from pipeline import quantize
    page = text_of(client.get(url("/section/quantization"), headers=HX))
    m = re.search(r'<p class="note" id="q-ratio">(.*?)</p>', page, re.S)
    assert m, "no reason for the compression ratio in the core"
    text = reading_text(m.group(1))
    bits, group = 3, 32                      # the section's defaults (its Param)
    scheme = quantize.scheme(f"int{bits}-g{group}")
    f32 = quantize.weight_memory(model.config, model.n_params(), None, float_bits=32)
    q = quantize.weight_memory(model.config, model.n_params(), scheme, float_bits=32)
    shrink, ideal = f32.total_bytes / q.total_bytes, 32 / bits
    assert shrink < ideal
    assert (f"Why {shrink:.2f}× and not {ideal:.3g}× (32 ÷ {bits}): each group of {group} weights "
            f"also stores a 2-byte scale (fp16) and a {bits}-bit zero point, so a quantized "
            f"weight costs {8 * q.linear_bytes / q.n_linear:.3f} bits") in text
    assert f"stay float32: {100 * q.other_bytes / f32.total_bytes:.0f}% of the float32 " \
           "model's bytes" in text
    # the headline's ratio is the same number
    assert f"{shrink:.2f}×" in reading_text(re.search(r'id="q-headline">(.*?)</p>', page,
                                                      re.S).group(1))
    # the section opens at the width its lead names
    assert "3 bits, where this section opens" in reading_text(page)
    assert np.isclose(8 * q.linear_bytes / q.n_linear, bits + (16 + bits) / group)
