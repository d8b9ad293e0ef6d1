"""Weight quantization of the running model, in NumPy: store weights in 8 or 4 bits, compute
in float32.

Which tensors: the linear layers inside the blocks (attention w_q, w_k, w_v, w_o and the
feed-forward matrices). The token embedding (tied to the output layer in the default model),
a separate output layer, position tables, norms and biases stay in float: GPTQ- and AWQ-style
checkpoints keep them at 16 bits too, because they are small next to the blocks in big models
and the output layer is sensitive. A weight matrix is [d_in, d_out] (`x @ w`); an output
channel is one column.

Schemes (both store each scale as float16, rounded up so that no weight is ever clipped):

    int8   symmetric, one scale per output channel:
               scale_j = max_i |w_ij| / 127,  q = round(w / scale) in [-127, 127]
               w ~ scale_j * q
    int4   asymmetric, group-wise: every run of g consecutive inputs of one column (g = 32,
    int3   64 or 128; a column's last run is shorter when g does not divide d_in) has its own
           scale and a b-bit zero point (b = 4 or 3 bits, L = 2^b - 1 = 15 or 7):
               lo = min(min w, 0), hi = max(max w, 0)      (the group's range, holding 0)
               scale = (hi - lo) / L,  zero = round(-lo / scale) in [0, L]
               q = clip(round(w / scale) + zero, 0, L),   w ~ scale * (q - zero)
           (GPTQ checkpoints are published in both: 4 bits, and 3 bits with groups of 128 or 32)

Either way every weight comes back within half a step: |w - dequantize(quantize(w))| <=
scale / 2. The codes are really stored as bytes (two 4-bit codes per byte; eight 3-bit codes
in three bytes), so a matrix's `nbytes` is the size of its arrays, and `quantized_bytes` gives
the same number by formula.

The dequantized weights go into an ordinary `Model`: the engine's own forward pass runs the
quantized model; there is no second implementation of the math.
"""
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.generation import decode_loop, finish_reason
from pipeline.model import Model, token_nll

SCALE_BITS = 16                       # every scale is a float16
GROUP_SIZES = (32, 64, 128)           # group sizes offered for the grouped schemes
GROUPED_BITS = (3, 4)                 # bit widths offered for the grouped schemes


@dataclass(frozen=True)
class Scheme:
    name: str                 # "int8" or "int4-g32" ...
    bits: int                 # bits per stored weight
    group_size: int = None    # inputs sharing one scale (None: a whole output channel)
    symmetric: bool = True    # symmetric: zero point fixed at 0, nothing stored for it

    @property
    def levels(self) -> int:  # distinct codes
        return 2 ** self.bits

    @property
    def zero_bits(self) -> int:  # bits stored per group for its zero point
        return 0 if self.symmetric else self.bits

    def describe(self) -> str:
        where = ("per output channel" if self.group_size is None
                 else f"groups of {self.group_size}")
        kind = "symmetric" if self.symmetric else "asymmetric"
        return f"{self.bits}-bit {kind}, {where}"


INT8 = Scheme("int8", 8)


def grouped(bits: int, group_size: int) -> Scheme:
    """The asymmetric group-wise scheme of `bits` bits ("int4-g32", "int3-g128" ...)."""
    if bits not in GROUPED_BITS:
        raise ValueError(f"bits must be one of {GROUPED_BITS}, not {bits}")
    if group_size not in GROUP_SIZES:
        raise ValueError(f"group size must be one of {GROUP_SIZES}, not {group_size}")
    return Scheme(f"int{bits}-g{group_size}", bits, group_size, symmetric=False)


def int4(group_size: int) -> Scheme:
    return grouped(4, group_size)


def scheme(name: str) -> Scheme:
    """"int8" or "int<b>-g<g>": b in GROUPED_BITS, g in GROUP_SIZES ("int4-g32", "int3-g64")."""
    if name == "int8":
        return INT8
    bits, _, group = name.partition("-g")
    if bits[:3] == "int" and bits[3:].isdigit() and group.isdigit():
        return grouped(int(bits[3:]), int(group))
    raise ValueError(f"unknown scheme {name!r} (int8, int4-g32, int4-g64, int4-g128, "
                     f"int3-g32 ...)")


# --- one matrix ------------------------------------------------------------------------------

def round_up_to_float16(x):  # float32 [...] -> float16 [...], each >= x
    h = x.astype(np.float16)
    low = h.astype(np.float32) < x
    h[low] = np.nextafter(h[low], np.float16(np.inf))
    return h


def group_view(w, group_size):  # [d_in, d_out] -> [n_groups, g, d_out]
    """Runs of g consecutive inputs of each column. When g does not divide d_in the last group
    is shorter: it is padded with zeros here (0 is always representable, so padding changes no
    scale) and the padding is never stored."""
    d_in, d_out = w.shape
    g = d_in if group_size is None else group_size
    n = -(-d_in // g)
    if n * g != d_in:
        w = np.concatenate([w, np.zeros((n * g - d_in, d_out), dtype=w.dtype)])
    return w.reshape(n, g, d_out)


def symmetric_scales(groups, bits):  # [n, g, d_out] -> [n, d_out]
    qmax = 2 ** (bits - 1) - 1                       # 127 for int8: -128 is left unused
    amax = np.abs(groups).max(axis=1)
    return round_up_to_float16(np.where(amax > 0, amax / qmax, 1.0).astype(np.float32))


def asymmetric_scales_zeros(groups, bits):  # [n, g, d_out] -> ([n, d_out], [n, d_out])
    qmax = 2 ** bits - 1                             # 15 for int4, 7 for int3
    lo = np.minimum(groups.min(axis=1), 0.0)
    hi = np.maximum(groups.max(axis=1), 0.0)
    scale = round_up_to_float16(np.where(hi > lo, (hi - lo) / qmax, 1.0).astype(np.float32))
    zero = np.clip(np.round(-lo / scale.astype(np.float32)), 0, qmax).astype(np.uint8)
    return scale, zero


def pack_nibbles(codes):  # uint8 [n] in [0, 15] -> uint8 [ceil(n / 2)]: two codes a byte
    codes = codes.reshape(-1)
    if codes.size % 2:
        codes = np.append(codes, np.uint8(0))
    return (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)


def unpack_nibbles(packed, n):  # uint8 [ceil(n / 2)] -> uint8 [n]
    out = np.empty(2 * packed.size, dtype=np.uint8)
    np.bitwise_and(packed, 0x0F, out=out[0::2])
    np.right_shift(packed, 4, out=out[1::2])
    return out[:n]


def _bit_places(bits):  # code i of a run of 8 -> (its byte, its shift in that byte)
    return [divmod(bits * i, 8) for i in range(8)]


def pack_bits(codes, bits):  # uint8 [n] below 2^bits -> uint8 [ceil(n * bits / 8)]
    """Codes of `bits` bits packed with no gaps: each run of 8 codes fills `bits` bytes, code i
    of the run at bit bits * i (little-endian); 4-bit codes are pack_nibbles'. Computed byte by
    byte in uint8 (a code that straddles two bytes puts its low bits in the first and its high
    bits in the next), not through 64-bit words: a 135 M-parameter model packs 106 M codes."""
    if bits == 4:
        return pack_nibbles(codes)
    codes = np.asarray(codes, dtype=np.uint8).reshape(-1)
    n = codes.size
    runs = codes if n % 8 == 0 else np.concatenate([codes, np.zeros(-n % 8, dtype=np.uint8)])
    runs = runs.reshape(-1, 8)
    out = np.zeros((runs.shape[0], bits), dtype=np.uint8)
    for i, (byte, shift) in enumerate(_bit_places(bits)):
        out[:, byte] |= runs[:, i] << np.uint8(shift)          # uint8: the high bits drop
        if shift + bits > 8:
            out[:, byte + 1] |= runs[:, i] >> np.uint8(8 - shift)
    return out.reshape(-1)[:math.ceil(n * bits / 8)].copy()


def unpack_bits(packed, n, bits):  # uint8 [ceil(n * bits / 8)] -> uint8 [n]
    if bits == 4:
        return unpack_nibbles(packed, n)
    runs = -(-n // 8)
    full = np.asarray(packed, dtype=np.uint8)
    if full.size != runs * bits:
        full = np.concatenate([full, np.zeros(runs * bits - full.size, dtype=np.uint8)])
    full = full.reshape(runs, bits)
    mask = np.uint8(2 ** bits - 1)
    out = np.empty((runs, 8), dtype=np.uint8)
    for i, (byte, shift) in enumerate(_bit_places(bits)):
        code = full[:, byte] >> np.uint8(shift)
        if shift + bits > 8:
            code |= full[:, byte + 1] << np.uint8(8 - shift)
        np.bitwise_and(code, mask, out=out[:, i])
    return out.reshape(-1)[:n]


@dataclass(frozen=True)
class QuantizedMatrix:
    """A weight matrix as stored: codes (bytes), float16 scales, packed zero points."""
    scheme: Scheme
    shape: tuple              # (d_in, d_out)
    codes: np.ndarray         # uint8: code + 2^(bits-1) (symmetric) or code (asymmetric);
                              #   codes of fewer than 8 bits packed (pack_bits)
    scales: np.ndarray        # float16 [n_groups, d_out]
    zeros: np.ndarray         # uint8: zero points packed (pack_bits; empty when symmetric)

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.scales.nbytes + self.zeros.nbytes

    @property
    def n_groups(self) -> int:
        return self.scales.size

    @property
    def group_size(self) -> int:
        return self.shape[0] if self.scheme.group_size is None else self.scheme.group_size

    def code_values(self):  # -> uint8 [d_in, d_out]: the unpacked codes
        n = math.prod(self.shape)
        codes = unpack_bits(self.codes, n, self.scheme.bits) if self.scheme.bits < 8 \
            else self.codes
        return codes.reshape(self.shape)

    def zero_points(self):  # -> float32 [n_groups, d_out]
        if self.scheme.symmetric:
            return np.full(self.scales.shape, 2 ** (self.scheme.bits - 1), dtype=np.float32)
        return unpack_bits(self.zeros, self.scales.size, self.scheme.bits).reshape(
            self.scales.shape).astype(np.float32)

    def per_weight(self, per_group):  # [n_groups, d_out] -> [d_in, d_out]: its group's value
        return np.repeat(per_group, self.group_size, axis=0)[:self.shape[0]]

    def dequantize(self):  # -> float32 [d_in, d_out]: scale * (code - zero)
        """scale * (code - zero) in float32. code - zero is a small whole number, exact in any
        integer type and in float32, so this is bit for bit the float32 arithmetic
        (float32(code) - float32(zero)) * float32(scale); it is computed in int16 first and
        multiplied in one pass because a big model dequantizes its blocks at every forward pass
        (`quantize_model(..., on_the_fly=True)`)."""
        d_in, d_out = self.shape
        g, n = self.group_size, self.scales.shape[0]
        codes = self.code_values()                                        # uint8 [d_in, d_out]
        if self.scheme.symmetric and self.scheme.bits == 8:
            diff = (codes ^ np.uint8(0x80)).view(np.int8)                  # code - 128
        else:
            zeros = self.zero_points().astype(np.int16)                    # [n, d_out]
            diff = codes.astype(np.int16)
            if n * g == d_in:
                diff = diff.reshape(n, g, d_out)
                diff -= zeros[:, None, :]
            else:                                                          # a shorter last group
                diff -= self.per_weight(zeros)
        scales = self.scales.astype(np.float32)
        if n * g == d_in:
            out = np.multiply(diff.reshape(n, g, d_out), scales[:, None, :], dtype=np.float32)
        else:
            out = np.multiply(diff, self.per_weight(scales), dtype=np.float32)
        return out.reshape(d_in, d_out)

    def step_sizes(self):  # -> float32 [d_in, d_out]: each weight's scale (its grid step)
        return self.per_weight(self.scales.astype(np.float32))

    def levels(self, group: int, column: int):  # -> float32: the values one group can hold
        scale = np.float32(self.scales[group, column])
        zero = self.zero_points()[group, column]
        codes = np.arange(self.scheme.levels, dtype=np.float32)
        if self.scheme.symmetric:
            codes = codes[1:]                        # code 0 (-128 for int8) is never used
        return (codes - zero) * scale


def quantize_matrix(w, s: Scheme) -> QuantizedMatrix:
    """Quantize a float32 [d_in, d_out] matrix with scheme s."""
    w = np.asarray(w, dtype=np.float32)
    groups = group_view(w, s.group_size)                            # [n, g, d_out]
    if s.symmetric:
        scale = symmetric_scales(groups, s.bits)
        offset = 2 ** (s.bits - 1)
        qmax = offset - 1
        q = np.clip(np.round(groups / scale.astype(np.float32)[:, None, :]), -qmax, qmax)
        codes, zeros = (q + offset).astype(np.uint8), np.zeros(0, dtype=np.uint8)
    else:
        scale, zero = asymmetric_scales_zeros(groups, s.bits)
        q = np.round(groups / scale.astype(np.float32)[:, None, :]) + zero[:, None, :]
        codes = np.clip(q, 0, s.levels - 1).astype(np.uint8)
        zeros = pack_bits(zero, s.bits) if s.bits < 8 else zero.reshape(-1)
    codes = codes.reshape(-1, w.shape[1])[:w.shape[0]]                # drop the padding
    if s.bits < 8:
        codes = pack_bits(codes, s.bits)
    return QuantizedMatrix(s, w.shape, codes, scale, zeros)


def levels_histogram(weights, levels, bins: int, span: tuple = None) -> tuple:
    """How many weights fall in each of `bins` equal bins spanning both the weights and the
    levels a format can hold (so every level is inside the drawn range), or `span` (lo, hi)
    when given (two histograms compared side by side: one range, one bin width): (counts int64
    [bins], edges float64 [bins + 1]), as np.histogram."""
    weights = np.asarray(weights, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64)
    lo, hi = min(weights.min(), levels.min()), max(weights.max(), levels.max())
    if span is not None:
        assert span[0] <= lo and hi <= span[1], (span, lo, hi)
        lo, hi = span
    return np.histogram(weights, bins=bins, range=(lo, hi))


def quantized_bytes(n_weights: int, n_groups: int, s: Scheme) -> int:
    """Bytes of a quantized matrix by formula: the codes (bits each, rounded up to whole bytes)
    + a float16 scale per group + the zero points (bits each, rounded up to whole bytes)."""
    return (math.ceil(n_weights * s.bits / 8) + n_groups * SCALE_BITS // 8
            + math.ceil(n_groups * s.zero_bits / 8))


def n_groups(d_in: int, d_out: int, s: Scheme) -> int:
    return d_out * (1 if s.group_size is None else -(-d_in // s.group_size))


# --- a whole model ---------------------------------------------------------------------------

def linear_weights(params) -> dict:
    """name -> [d_in, d_out] for every quantized matrix: the blocks' linear layers (w_*)."""
    return {f"blocks.{i}.{part}.{name}": w
            for i, block in enumerate(params["blocks"])
            for part in ("attn", "mlp")
            for name, w in block[part].items() if name.startswith("w_")}


def float_parameters(model: Model) -> int:
    """Parameters left in float: everything but the quantized matrices (tied once)."""
    return model.n_params() - sum(w.size for w in linear_weights(model.params).values())


@dataclass(frozen=True)
class QuantizedModel:
    scheme: Scheme
    matrices: dict            # name -> QuantizedMatrix
    model: Model              # the same architecture with the dequantized weights
    float_bytes: int          # the tensors kept in float32 (embeddings, norms)

    @property
    def matrix_bytes(self) -> int:
        return sum(m.nbytes for m in self.matrices.values())

    @property
    def nbytes(self) -> int:
        return self.matrix_bytes + self.float_bytes


def dequantized_block(block: dict, i: int, matrices: dict) -> dict:
    """Block i's parameters with its linear layers read back from their quantized form."""
    new = dict(block)
    for part in ("attn", "mlp"):
        new[part] = {name: (matrices[f"blocks.{i}.{part}.{name}"].dequantize()
                            if name.startswith("w_") else w)
                     for name, w in block[part].items()}
    return new


class DequantizedOnTheFly(Sequence):
    """The blocks of a quantized model, each dequantized when the forward pass reaches it and
    dropped after: `pipeline.model.transformer` iterates them like the list of block dicts, so
    the engine's own forward pass runs the quantized model while at most one block's float32
    weights exist (a 135 M-parameter model's blocks are 424 MB as float32, 106 MB as int8).
    Every access dequantizes again: the same arrays as `quantize_model(..., on_the_fly=False)`
    holds, bit for bit, at the cost of dequantizing every block at every pass."""

    def __init__(self, blocks, matrices: dict, indices=None):
        self.blocks, self.matrices = blocks, matrices
        self.indices = range(len(blocks)) if indices is None else indices

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, k):
        if isinstance(k, slice):                  # Model._run slices blocks[:n_layers]
            return DequantizedOnTheFly(self.blocks, self.matrices, self.indices[k])
        i = self.indices[k]
        return dequantized_block(self.blocks[i], i, self.matrices)


def quantize_model(model: Model, s: Scheme, on_the_fly: bool = False) -> QuantizedModel:
    """Quantize the blocks' linear layers; the returned model computes with their dequantized
    float32 values (everything else is shared with `model`). on_the_fly=False keeps those
    float32 matrices (as many bytes as the original's); on_the_fly=True keeps only the codes
    and scales and dequantizes each block as the forward pass reaches it (DequantizedOnTheFly):
    the same logits, bit for bit, a quarter of the memory or less, slower passes."""
    matrices = {name: quantize_matrix(w, s) for name, w in linear_weights(model.params).items()}
    if on_the_fly:
        blocks = DequantizedOnTheFly(model.params["blocks"], matrices)
    else:
        blocks = [dequantized_block(b, i, matrices) for i, b in enumerate(model.params["blocks"])]
    dequantized = Model(model.config, {**model.params, "blocks": blocks}, model.tokenizer,
                        path=model.path)
    return QuantizedModel(s, matrices, dequantized, float_bytes=4 * float_parameters(model))


def scheme_arrays(model: Model, s: Scheme) -> dict:
    """What quantize_model(model, s) holds, as plain arrays to keep (on disk, mapped: the
    web app keeps a big model's schemes so): name -> {"codes", "scales", "zeros", "weights"},
    "weights" the matrix dequantized to float32."""
    out = {}
    for name, w in linear_weights(model.params).items():
        m = quantize_matrix(w, s)
        out[name] = dict(codes=m.codes, scales=m.scales, zeros=m.zeros, weights=m.dequantize())
    return out


def model_from_arrays(model: Model, s: Scheme, arrays: dict) -> QuantizedModel:
    """The QuantizedModel of scheme_arrays(model, s) (arrays read back, maybe mapped): the
    same matrices and the same dequantized weights as quantize_model(model, s), bit for bit,
    nothing computed again."""
    matrices = {name: QuantizedMatrix(s, tuple(a["weights"].shape), a["codes"], a["scales"],
                                      a["zeros"])
                for name, a in arrays.items()}
    blocks = []
    for i, block in enumerate(model.params["blocks"]):
        new = dict(block)
        for part in ("attn", "mlp"):
            new[part] = {name: (arrays[f"blocks.{i}.{part}.{name}"]["weights"]
                                if name.startswith("w_") else w)
                         for name, w in block[part].items()}
        blocks.append(new)
    dequantized = Model(model.config, {**model.params, "blocks": blocks}, model.tokenizer,
                        path=model.path)
    return QuantizedModel(s, matrices, dequantized, float_bytes=4 * float_parameters(model))


# --- what quantization changes ---------------------------------------------------------------

def max_logit_change(logits, other) -> float:  # two [T, V] -> the largest |difference|
    return float(np.abs(np.asarray(logits) - np.asarray(other)).max())


def top1_agreement(logits, other) -> float:  # share of positions with the same top token
    return float((np.argmax(logits, -1) == np.argmax(other, -1)).mean())


def heldout_windows(tokenizer, text: str, n_windows: int, window: int) -> list:
    """The first n_windows non-overlapping windows of text: [(inputs, next tokens)], each
    `window` tokens (the last may be shorter)."""
    ids = np.array(tokenizer.encode_ordinary(text), dtype=np.int64)
    out = []
    for start in range(0, len(ids) - 1, window):
        if len(out) == n_windows:
            break
        targets = ids[start + 1:start + window + 1]
        out.append((ids[start:start + len(targets)], targets))
    return out


@dataclass(frozen=True)
class HeldoutResult:
    perplexity: float         # exp(mean negative log-likelihood per token)
    nll: float                # nats per predicted token
    n_tokens: int             # predicted tokens
    top1: np.ndarray          # [n_tokens] the model's top token at each position


def heldout_perplexity(model: Model, windows: list) -> HeldoutResult:
    nlls, tops = [], []
    for inputs, targets in windows:
        logits = model.forward(inputs)                                   # [T, V]
        nlls.append(token_nll(logits, targets))
        tops.append(np.argmax(logits, -1))
    nll = np.concatenate(nlls)
    return HeldoutResult(float(np.exp(nll.mean())), float(nll.mean()), int(nll.size),
                         np.concatenate(tops))


def greedy_by_checking(model: Model, prompt_ids, max_new_tokens: int, guess,
                       stop_at_eos: bool = True) -> tuple:
    """model's greedy continuation, the tokens `decode_loop` gives (at most max_new_tokens,
    ending after the end-of-text token or when the context is full), checked against a guess
    in one forward pass: speculative decoding's check with greedy acceptance, once.

    guess: token ids that may continue prompt_ids (float32's greedy text, for a quantized
    model). One model.forward over the prompt and the guess; the guess's tokens are kept while
    each is model's own argmax at its position; the first that is not is replaced by model's
    argmax (when all are kept, model's argmax after the last is added), and decode_loop
    makes the rest. Every token is model's argmax given the tokens before it. A quantized
    model dequantized on the fly pays for its weights once per pass, so one pass for the
    tokens it shares with float32 saves a pass per token.

    The checking pass fills a KV cache: the decoding after it starts from that cache, cut
    back to the tokens kept (no pass over the prompt again).

    Returns (tokens, logits [len(prompt_ids) + len(kept guess), V] of the checking pass)."""
    ids = [int(t) for t in prompt_ids]
    n_ctx = model.config.n_ctx
    eos = model.config.eos_token_id if stop_at_eos else None
    g = [int(t) for t in guess][:max(0, min(max_new_tokens - 1, n_ctx - len(ids)))]
    kv = model.new_kv_cache()
    logits = model.prefill(ids + g, kv)                              # [T + len(g), V]
    out = []
    for j, pick in enumerate(int(p) for p in np.argmax(logits[len(ids) - 1:], -1)):
        out.append(pick)
        if finish_reason(pick, len(ids) + len(out), len(out), max_new_tokens, n_ctx, eos):
            return out, logits
        if j < len(g) and pick != g[j]:
            break
    kv.truncate(len(ids) + len(out) - 1)          # the prompt and the guesses kept
    after = model.decode(out[-1], kv)              # model's logits after its own last token
    out += [p.token for p in decode_loop(model, ids + out, max_new_tokens - len(out),
                                         stop_at_eos=stop_at_eos, start=(kv, after))]
    return out, logits


# --- a GGUF file's own blocks: the bytes the engine's float32 weights were decoded from ---------

BLOCK_FORMATS = {            # ggml type -> (weights per block, bytes per block)
    "Q4_1": (32, 20),        # fp16 d, fp16 m, 16 bytes of 4-bit codes: w = d * q + m
    "Q8_0": (32, 34),        # fp16 d, 32 int8 codes: w = d * q
}


@dataclass(frozen=True)
class StoredBlock:
    type_name: str            # "Q4_1" or "Q8_0"
    raw: bytes                # the block as it is in the file
    d: np.float32             # the block's scale (an fp16 in the file)
    m: np.float32             # Q4_1: the block's minimum (an fp16); Q8_0: None
    codes: np.ndarray         # int16 [32]: Q4_1 0..15, Q8_0 -128..127
    weights: np.ndarray       # float32 [32]: d * q + m (Q4_1), d * q (Q8_0)


def decode_block(type_name: str, raw: bytes) -> StoredBlock:
    """One block of ggml's Q4_1 or Q8_0, by hand: little-endian fp16 d (and m), then the codes.
    Q4_1 packs two codes a byte: byte j holds code j in its low 4 bits and code j + 16 in its
    high 4 bits. The float32 arithmetic is gguf.quants.dequantize's ((d * q) + m)."""
    if type_name not in BLOCK_FORMATS:
        raise ValueError(f"{type_name} blocks are not decoded here "
                         f"(only {', '.join(BLOCK_FORMATS)})")
    n, size = BLOCK_FORMATS[type_name]
    raw = bytes(raw)
    if len(raw) != size:
        raise ValueError(f"a {type_name} block is {size} bytes, not {len(raw)}")
    if type_name == "Q4_1":
        d, m = np.frombuffer(raw[:4], "<f2").astype(np.float32)
        qs = np.frombuffer(raw[4:], np.uint8)
        codes = np.concatenate([qs & 0x0F, qs >> 4]).astype(np.int16)
        return StoredBlock(type_name, raw, d, m, codes, d * codes.astype(np.float32) + m)
    d = np.frombuffer(raw[:2], "<f2").astype(np.float32)[0]
    codes = np.frombuffer(raw[2:], np.int8).astype(np.int16)
    return StoredBlock(type_name, raw, d, None, codes, codes.astype(np.float32) * d)


def stored_tensors(model: Model) -> dict:
    """GGUF name -> StoredTensor, each tensor of the file once (a tied output layer is the
    embedding's tensor; GPT-2's fused q|k|v is one tensor)."""
    return {st.name: st for st in model.stored.values()}


def stored_type_counts(model: Model) -> dict:
    """ggml type -> how many of the file's tensors are stored as it, most first."""
    counts = {}
    for st in stored_tensors(model).values():
        counts[st.type_name] = counts.get(st.type_name, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _param(model: Model, path: tuple):
    node = model.params
    for k in path:
        node = node[k]
    return node


def engine_block_location(model: Model, path: tuple, k: int) -> tuple:
    """Where block k of the stored tensor of `path` (a key of model.stored) went in the engine:
    (param path, row slice, column) of a matrix held [in, out] ([rows, columns] for the
    embedding: (path, row, column slice)).

    A GGUF matrix is stored as rows of its innermost dimension ([out, in] for a linear layer,
    [V, d] for the embedding), blocks running along each row; the engine holds a linear layer
    as [in, out] (pipeline.gguf_file), so a stored row is a column of the engine's matrix, and
    the rows of attn_q / attn_k were moved by unpermute_rope_rows."""
    from pipeline.gguf_file import unpermute_rope_rows
    st = model.stored[path]
    if len(st.shape) != 2:
        raise ValueError(f"{st.name} is not a matrix")
    row, col = divmod(k * st.block_size, st.shape[0])
    cols = slice(col, col + st.block_size)
    if st.name.endswith("embd.weight"):                     # token_embd / position_embd [V, d]
        return ("wte",) if path == ("unembed",) else path, row, cols
    c = model.config
    if st.name.endswith(("attn_q.weight", "attn_k.weight")):
        heads = c.n_heads if st.name.endswith("attn_q.weight") else c.n_kv_heads
        moved = unpermute_rope_rows(np.arange(st.shape[1])[:, None], heads,
                                    c.rotary_dim())[:, 0]
        row = int(np.flatnonzero(moved == row)[0])         # the engine's row that came from it
    if st.name.endswith("attn_qkv.weight"):                # GPT-2: q | k | v rows of one tensor
        part, row = divmod(row, c.d_model)
        path = path[:-1] + (f"w_{'qkv'[part]}",)
    return path, cols, row


def engine_block_weights(model: Model, path: tuple, k: int) -> np.ndarray:
    """float32 [block_size]: the engine's weights that block k of the stored tensor of `path`
    was decoded into, read from model.params (engine_block_location)."""
    where, a, b = engine_block_location(model, path, k)
    return _param(model, where)[a, b]


def weight_change(model: Model, qmodel: "QuantizedModel") -> dict:
    """How far quantizing moved the weights of the blocks' linear layers: the share left
    exactly as they were and the RMS change relative to the weights' RMS (float64 sums)."""
    same = total = 0
    sq_change = sq_weight = 0.0
    # the quantized model's own weights, block by block (held, or dequantized on the fly: one
    # block's float32 matrices at a time)
    blocks = qmodel.model.params["blocks"]
    for i, block in enumerate(model.params["blocks"]):
        back_block = blocks[i]
        for part in ("attn", "mlp"):
            for name, w in block[part].items():
                if not name.startswith("w_"):
                    continue
                back = back_block[part][name]
                same += int((back == w).sum())
                total += w.size
                sq_change += float(np.square(back - w, dtype=np.float64).sum())
                sq_weight += float(np.square(w, dtype=np.float64).sum())
    return dict(unchanged=same / total, relative_rms=math.sqrt(sq_change / sq_weight),
                n_weights=total)


# --- published configurations: the same storage formula, from the config's shapes ------------

def linear_shapes(config) -> list:
    """[(name, d_in, d_out, count)] of the blocks' linear layers of a ModelConfig: the matrices
    this module quantizes (the same as `linear_weights` of a loaded model)."""
    d, hd, n = config.d_model, config.head_dim, config.n_layers
    q, kv = config.n_heads * hd, config.n_kv_heads * hd
    if config.model_type == "gpt2":
        return [("attn.w_q", d, q, n), ("attn.w_k", d, kv, n), ("attn.w_v", d, kv, n),
                ("attn.w_o", q, d, n), ("mlp.w_fc", d, config.d_ff, n),
                ("mlp.w_proj", config.d_ff, d, n)]
    return [("attn.w_q", d, q, n), ("attn.w_k", d, kv, n), ("attn.w_v", d, kv, n),
            ("attn.w_o", q, d, n), ("mlp.w_gate", d, config.d_ff, n),
            ("mlp.w_up", d, config.d_ff, n), ("mlp.w_down", config.d_ff, d, n)]


@dataclass(frozen=True)
class WeightMemory:
    n_params: int             # all parameters
    n_linear: int             # of which in the blocks' linear layers (quantized)
    n_groups: int             # scales stored (0 for plain float)
    linear_bytes: int         # the quantized matrices: codes + scales + zero points
    other_bytes: int          # the rest, kept at `float_bits`

    @property
    def total_bytes(self) -> int:
        return self.linear_bytes + self.other_bytes


def weight_memory(config, n_params: int, s: Scheme = None, float_bits: int = 16) -> WeightMemory:
    """Weight bytes of a model with this config: its linear layers quantized with s (None: all
    at float_bits), the remaining n_params - n_linear parameters at float_bits."""
    shapes = linear_shapes(config)
    n_linear = sum(i * o * c for _, i, o, c in shapes)
    if s is None:
        return WeightMemory(n_params, n_linear, 0, n_linear * float_bits // 8,
                            (n_params - n_linear) * float_bits // 8)
    groups = sum(n_groups(i, o, s) * c for _, i, o, c in shapes)
    linear = sum(quantized_bytes(i * o, n_groups(i, o, s), s) * c for _, i, o, c in shapes)
    return WeightMemory(n_params, n_linear, groups, linear,
                        (n_params - n_linear) * float_bits // 8)
