"""The roofline: is a phase of inference limited by arithmetic or by memory traffic?

A chip does at most `peak_flops` operations per second and moves at most `bandwidth` bytes per
second from its main memory. Work that does F operations on B bytes takes at least
max(F / peak_flops, B / bandwidth) seconds. Its arithmetic intensity F / B (operations per byte)
decides which term wins: below the ridge point peak_flops / bandwidth the chip waits for memory
(memory-bound), above it the arithmetic units are the limit (compute-bound) (Williams, Waterman
and Patterson, "Roofline", CACM 2009).

For a decoder, per generated token and per sequence:
- prefill of P prompt tokens reads every weight once and uses it for all P tokens: intensity
  grows with P (compute-bound for long prompts);
- a decode step reads every weight (and the whole KV cache) to produce ONE token per sequence:
  intensity is about 1 operation per byte at 16-bit weights whatever the model (memory-bound),
  which is why batching many sequences into one step pays.

The counts are the usual first-order ones (as in Kaplan et al. 2020, "Scaling laws", table 1):
2 operations (a multiply and an add) per weight of a matrix multiplication per token, plus the
attention scores and weighted sums (2 x 2 x layers x heads x head_dim per token per earlier
position); bytes are the weights read once per forward pass plus the KV cache read and written.
Activations, norms and softmax are left out (small next to these for the sizes shown).
"""
import time
from dataclasses import dataclass

import numpy as np

from pipeline.kvcache import kv_bytes_per_token
from pipeline.quantize import INT8, int4, weight_memory
from pipeline.sizes import parameter_counts

GiB = 2 ** 30


@dataclass(frozen=True)
class Hardware:
    name: str
    peak_flops: float      # dense 16-bit (fp16/bf16) matrix operations per second, no sparsity
    bandwidth: float       # bytes per second from main memory (HBM / GDDR)
    memory: float          # bytes of main memory (the vendor's "GB" of DRAM are GiB: below)
    source: str            # where the numbers are published

    @property
    def ridge(self) -> float:
        """Operations per byte above which the chip is compute-bound."""
        return self.peak_flops / self.bandwidth


# Published peak numbers (vendor data sheets). Dense tensor-core fp16/bf16 throughput: the
# sheets also print "with sparsity" figures twice as large, which dense inference cannot use.
# Bandwidths are decimal (GB/s = 1e9 bytes per second), as every vendor uses them.
#
# Memory capacities: every sheet prints "GB" (L4 "24GB GDDR6", RTX 4090 "24 GB GDDR6X", A100
# "80GB HBM2e", H100 SXM "80GB HBM3", MI300X "192 GB HBM3"), but DRAM dies are made in binary
# sizes (a 16 Gbit die holds 2^34 bits) and the capacities are whole numbers of such dies:
# H100 SXM: 5 active HBM3 stacks of 16 GiB = 80 GiB; A100 80GB: 5 HBM2e stacks of 16 GiB;
# MI300X: 8 HBM3 stacks of 24 GiB (12 dies of 2 GiB) = 192 GiB; RTX 4090: 12 GDDR6X chips of
# 2 GiB; L4: 12 GDDR6 chips of 2 GiB. So the bytes are the printed number times 2^30. Part of
# it can be reserved (ECC on GDDR6, the driver): the "fits" column is an upper bound.
HARDWARE = (
    Hardware("NVIDIA L4", 121e12, 300e9, 24 * GiB,
             "NVIDIA L4 Tensor Core GPU data sheet: FP16 Tensor Core 242 TFLOPS with sparsity, "
             "24GB GDDR6 (24 GiB), 300 GB/s"),
    Hardware("NVIDIA RTX 4090", 165.2e12, 1008e9, 24 * GiB,
             "NVIDIA Ada Lovelace GPU architecture whitepaper (GeForce RTX 4090): FP16 Tensor "
             "TFLOPS with FP32 accumulate 165.2 (dense), 24 GB GDDR6X (24 GiB), 1008 GB/s"),
    Hardware("NVIDIA A100 SXM 80GB", 312e12, 2039e9, 80 * GiB,
             "NVIDIA A100 Tensor Core GPU data sheet: BF16 Tensor Core 312 TFLOPS (624 with "
             "sparsity), 80GB HBM2e (80 GiB), 2,039 GB/s"),
    Hardware("NVIDIA H100 SXM", 989.4e12, 3350e9, 80 * GiB,
             "NVIDIA H100 Tensor Core GPU data sheet: BF16 Tensor Core 1,979 TFLOPS with "
             "sparsity, 80GB HBM3 (80 GiB), 3.35 TB/s"),
    Hardware("AMD MI300X", 1307.4e12, 5300e9, 192 * GiB,
             "AMD Instinct MI300X accelerator data sheet: FP16/BF16 1,307.4 TFLOPS dense, "
             "192 GB HBM3 (192 GiB), 5.3 TB/s"),
)


def hardware(name: str) -> Hardware:
    for h in HARDWARE:
        if h.name == name:
            return h
    raise KeyError(f"{name!r}: known are {', '.join(h.name for h in HARDWARE)}")


@dataclass(frozen=True)
class ModelCosts:
    """What one forward pass of a model costs, from its configuration."""
    matmul_params: int         # weights multiplied with every token (blocks and unembedding)
    weight_bytes: float        # bytes of all weights read per forward pass
    kv_bytes_per_token: float  # bytes one position adds to the KV cache (all layers)
    attn_flops_per_pair: int   # operations per (query, earlier key) pair, all layers and heads


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float
    tokens: int                # tokens produced (decode) or processed (prefill)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def prefill_work(m: ModelCosts, n_prompt: int, batch: int = 1) -> Work:
    """One forward pass over `n_prompt` tokens of `batch` sequences: weights read once, each
    sequence's KV cache written, causal attention over n(n+1)/2 (query, key) pairs."""
    pairs = n_prompt * (n_prompt + 1) // 2
    flops = batch * (2 * m.matmul_params * n_prompt + m.attn_flops_per_pair * pairs)
    moved = m.weight_bytes + batch * n_prompt * m.kv_bytes_per_token
    return Work(flops, moved, batch * n_prompt)


def decode_work(m: ModelCosts, context: int, batch: int = 1) -> Work:
    """One decode step of `batch` sequences that each hold `context` earlier tokens: weights
    read once for the whole batch, every sequence's KV cache read, one new position written."""
    flops = batch * (2 * m.matmul_params + m.attn_flops_per_pair * (context + 1))
    moved = m.weight_bytes + batch * (context + 1) * m.kv_bytes_per_token
    return Work(flops, moved, batch)


@dataclass(frozen=True)
class Estimate:
    seconds: float
    bound: str                 # "memory" or "compute"
    tokens_per_second: float
    attainable_flops: float    # min(peak, intensity x bandwidth): the roof at this intensity


def roofline(work: Work, peak_flops: float, bandwidth: float) -> Estimate:
    """The best time the roofline allows: max(F / peak, B / bandwidth)."""
    compute, memory = work.flops / peak_flops, work.bytes / bandwidth
    seconds = max(compute, memory)
    return Estimate(seconds, "compute" if compute >= memory else "memory",
                    work.tokens / seconds, attainable(work.intensity, peak_flops, bandwidth))


def attainable(intensity, peak_flops: float, bandwidth: float):
    """The roof: min(peak_flops, intensity x bandwidth) operations per second, at an intensity
    (operations per byte) or at each of an array of them."""
    if np.ndim(intensity) == 0:
        return min(peak_flops, intensity * bandwidth)
    return np.minimum(peak_flops, np.asarray(intensity, dtype=np.float64) * bandwidth)


def roof_curve(peak_flops: float, bandwidth: float, lowest=0.1, highest=1e4, n=60) -> tuple:
    """The roof drawn over intensities `lowest` to `highest` (log-spaced): (intensities,
    attainable operations per second), float64 [n] each."""
    intensities = np.logspace(np.log10(lowest), np.log10(highest), n)
    return intensities, attainable(intensities, peak_flops, bandwidth)


# Weight storage for a number of bits per weight: 16 = every weight a 16-bit float; 8 and 4 =
# the blocks' linear layers quantized as pipeline.quantize stores them (int8 per output channel;
# int4 in groups of 128, the group size GPTQ and AWQ checkpoints commonly use), with their
# scales and zero points, and the embeddings and norms kept at 16 bits.
INT4_GROUP = 128
WEIGHT_SCHEMES = {16: None, 8: INT8, 4: int4(INT4_GROUP)}


def weight_scheme(bits: int):
    """The pipeline.quantize Scheme for `bits` per weight (None: plain 16-bit floats)."""
    if bits not in WEIGHT_SCHEMES:
        raise ValueError(f"bits per weight must be one of {', '.join(map(str, WEIGHT_SCHEMES))}")
    return WEIGHT_SCHEMES[bits]


def model_costs(config, n_params: int, bytes_per_weight: float, bytes_per_kv: float,
                scheme=None) -> ModelCosts:
    """The costs of a configuration (pipeline.model.ModelConfig) holding `n_params` weights.

    Weight bytes are pipeline.quantize.weight_memory's, the function the quantization section
    uses: the blocks' linear layers stored with `scheme` (codes + scales + zero points; None:
    as floats), every other weight at `bytes_per_weight`. Every weight is read once per forward
    pass. All of them multiply activations except the token-embedding table (one row is looked
    up per token) and GPT-2's position table, unless the unembedding shares the token table
    (tied: that matrix is multiplied by every token). Norm scales and biases are counted like
    matrix weights: they are under 0.1% of them.
    The breakdown is pipeline.sizes'; the KV entry per token is pipeline.kvcache's.
    """
    counts = parameter_counts(config)
    lookup_only = counts.positions + (0 if config.tied_embeddings else counts.embedding)
    memory = weight_memory(config, n_params, scheme, float_bits=round(8 * bytes_per_weight))
    return ModelCosts(
        matmul_params=n_params - lookup_only,
        weight_bytes=memory.total_bytes,
        kv_bytes_per_token=kv_bytes_per_token(config, bytes_per_kv),
        attn_flops_per_pair=2 * 2 * config.n_layers * config.n_heads * config.head_dim)


def compute_bound_from(m: ModelCosts, peak_flops: float, bandwidth: float, max_tokens: int):
    """The shortest prompt (1 to max_tokens) whose prefill is compute-bound on this roof, or
    None. The prefill's intensity grows with the prompt length P: with a = 2 x matmul weights +
    half the attention operations per pair, b = the other half, W the weight bytes and k the KV
    bytes per token, intensity = (a P + b P^2) / (W + k P), whose derivative has the numerator
    a W + 2 b W P + b k P^2 > 0. So a binary search finds the first P at the ridge."""
    def compute(n):
        return roofline(prefill_work(m, n), peak_flops, bandwidth).bound == "compute"
    if max_tokens < 1 or not compute(max_tokens):
        return None
    lo, hi = 1, max_tokens                       # compute(hi) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if compute(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Machine:
    """This server's own roof, measured: float32 matrix products and a large memory copy."""
    peak_flops: float      # operations per second of a 1024 x 1024 float32 matrix product
    bandwidth: float       # bytes per second read + written by copying a 256 MiB array
    threads: str           # the BLAS thread setting it was measured with


def best_time(fn, repeats=3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_machine(n=1024, copy_bytes=256 * 2**20) -> Machine:
    """Best of three runs each (the roofline is about what the chip can do, not its average)."""
    import os
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    flops = 2 * n ** 3 / best_time(lambda: np.matmul(a, b, out=out))
    src = np.ones(copy_bytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    bandwidth = 2 * src.nbytes / best_time(lambda: np.copyto(dst, src))
    return Machine(flops, bandwidth, os.environ.get("OPENBLAS_NUM_THREADS", "unset"))
