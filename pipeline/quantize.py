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
           64 or 128; a column's last run is shorter when g does not divide d_in) has its own
           scale and a 4-bit zero point:
               lo = min(min w, 0), hi = max(max w, 0)      (the group's range, holding 0)
               scale = (hi - lo) / 15,  zero = round(-lo / scale) in [0, 15]
               q = clip(round(w / scale) + zero, 0, 15),   w ~ scale * (q - zero)

Either way every weight comes back within half a step: |w - dequantize(quantize(w))| <=
scale / 2. The codes are really stored as bytes (two 4-bit codes per byte), so a matrix's
`nbytes` is the size of its arrays, and `quantized_bytes` gives the same number by formula.

The dequantized weights go into an ordinary `Model`: the engine's own forward pass runs the
quantized model; there is no second implementation of the math.
"""
import math
from dataclasses import dataclass

import numpy as np

from pipeline.model import Model

SCALE_BITS = 16                       # every scale is a float16
GROUP_SIZES = (32, 64, 128)           # int4 group sizes offered


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


def int4(group_size: int) -> Scheme:
    if group_size not in GROUP_SIZES:
        raise ValueError(f"group size must be one of {GROUP_SIZES}, not {group_size}")
    return Scheme(f"int4-g{group_size}", 4, group_size, symmetric=False)


def scheme(name: str) -> Scheme:
    """"int8" or "int4-g32" / "int4-g64" / "int4-g128"."""
    if name == "int8":
        return INT8
    if name.startswith("int4-g") and name[6:].isdigit():
        return int4(int(name[6:]))
    raise ValueError(f"unknown scheme {name!r} (int8, int4-g32, int4-g64, int4-g128)")


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
    qmax = 2 ** bits - 1                             # 15 for int4
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
    return np.stack([packed & 0x0F, packed >> 4], axis=1).reshape(-1)[:n]


@dataclass(frozen=True)
class QuantizedMatrix:
    """A weight matrix as stored: codes (bytes), float16 scales, packed zero points."""
    scheme: Scheme
    shape: tuple              # (d_in, d_out)
    codes: np.ndarray         # uint8: code + 2^(bits-1) (symmetric) or code (asymmetric);
                              #   4-bit codes packed two to a byte
    scales: np.ndarray        # float16 [n_groups, d_out]
    zeros: np.ndarray         # uint8: 4-bit zero points packed (empty when symmetric)

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
        codes = unpack_nibbles(self.codes, n) if self.scheme.bits == 4 else self.codes
        return codes.reshape(self.shape)

    def zero_points(self):  # -> float32 [n_groups, d_out]
        if self.scheme.symmetric:
            return np.full(self.scales.shape, 2 ** (self.scheme.bits - 1), dtype=np.float32)
        return unpack_nibbles(self.zeros, self.scales.size).reshape(
            self.scales.shape).astype(np.float32)

    def per_weight(self, per_group):  # [n_groups, d_out] -> [d_in, d_out]: its group's value
        return np.repeat(per_group, self.group_size, axis=0)[:self.shape[0]]

    def dequantize(self):  # -> float32 [d_in, d_out]: scale * (code - zero)
        codes = self.code_values().astype(np.float32)
        return (codes - self.per_weight(self.zero_points())) \
            * self.per_weight(self.scales.astype(np.float32))

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
        zeros = pack_nibbles(zero) if s.bits == 4 else zero.reshape(-1)
    codes = codes.reshape(-1, w.shape[1])[:w.shape[0]]                # drop the padding
    if s.bits == 4:
        codes = pack_nibbles(codes)
    return QuantizedMatrix(s, w.shape, codes, scale, zeros)


def levels_histogram(weights, levels, bins: int) -> tuple:
    """How many weights fall in each of `bins` equal bins spanning both the weights and the
    levels a format can hold (so every level is inside the drawn range): (counts int64 [bins],
    edges float64 [bins + 1]), as np.histogram."""
    weights = np.asarray(weights, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64)
    lo, hi = min(weights.min(), levels.min()), max(weights.max(), levels.max())
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


def quantize_model(model: Model, s: Scheme) -> QuantizedModel:
    """Quantize the blocks' linear layers; the returned model computes with their dequantized
    float32 values (everything else is shared with `model`)."""
    matrices = {name: quantize_matrix(w, s) for name, w in linear_weights(model.params).items()}
    blocks = []
    for i, block in enumerate(model.params["blocks"]):
        new = dict(block)
        for part in ("attn", "mlp"):
            new[part] = {name: (matrices[f"blocks.{i}.{part}.{name}"].dequantize()
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


def token_nll(logits, targets):  # [T, V], [T] -> [T]: -log softmax(logits)[target], float64
    logits = np.asarray(logits, dtype=np.float64)
    top = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(-1)) + top[:, 0]
    return log_z - logits[np.arange(len(targets)), targets]


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
