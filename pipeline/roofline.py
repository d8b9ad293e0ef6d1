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
from pipeline.sizes import parameter_counts


@dataclass(frozen=True)
class Hardware:
    name: str
    peak_flops: float      # dense 16-bit (fp16/bf16) matrix operations per second, no sparsity
    bandwidth: float       # bytes per second from main memory (HBM / GDDR)
    memory: float          # bytes of main memory
    source: str            # where the numbers are published

    @property
    def ridge(self) -> float:
        """Operations per byte above which the chip is compute-bound."""
        return self.peak_flops / self.bandwidth


# Published peak numbers (vendor data sheets). Dense tensor-core fp16/bf16 throughput: the
# sheets also print "with sparsity" figures twice as large, which dense inference cannot use.
HARDWARE = (
    Hardware("NVIDIA L4", 121e12, 300e9, 24e9,
             "NVIDIA L4 data sheet: FP16 Tensor Core 242 TFLOPS with sparsity, 300 GB/s GDDR6"),
    Hardware("NVIDIA RTX 4090", 165.2e12, 1008e9, 24e9,
             "NVIDIA Ada Lovelace architecture whitepaper: FP16 Tensor TFLOPS with FP32 "
             "accumulate 165.2 (dense), 1008 GB/s GDDR6X"),
    Hardware("NVIDIA A100 SXM 80GB", 312e12, 2039e9, 80e9,
             "NVIDIA A100 data sheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), "
             "2,039 GB/s HBM2e"),
    Hardware("NVIDIA H100 SXM", 989.4e12, 3350e9, 80e9,
             "NVIDIA H100 data sheet: BF16 Tensor Core 1,979 TFLOPS with sparsity, "
             "3.35 TB/s HBM3"),
    Hardware("AMD MI300X", 1307.4e12, 5300e9, 192e9,
             "AMD Instinct MI300X data sheet: FP16/BF16 1,307.4 TFLOPS dense, 5.3 TB/s HBM3"),
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


def model_costs(config, n_params: int, bytes_per_weight: float,
                bytes_per_kv: float) -> ModelCosts:
    """The costs of a configuration (pipeline.model.ModelConfig) holding `n_params` weights.

    Every weight is read once per forward pass. All of them multiply activations except the
    token-embedding table (one row is looked up per token) and GPT-2's position table, unless
    the unembedding shares the token table (tied: that matrix is multiplied by every token).
    Norm scales and biases are counted like matrix weights: they are under 0.1% of them.
    The breakdown is pipeline.sizes'; the KV entry per token is pipeline.kvcache's.
    """
    counts = parameter_counts(config)
    lookup_only = counts.positions + (0 if config.tied_embeddings else counts.embedding)
    return ModelCosts(
        matmul_params=n_params - lookup_only,
        weight_bytes=n_params * bytes_per_weight,
        kv_bytes_per_token=kv_bytes_per_token(config, bytes_per_kv),
        attn_flops_per_pair=2 * 2 * config.n_layers * config.n_heads * config.head_dim)


@dataclass(frozen=True)
class Machine:
    """This server's own roof, measured: float32 matrix products and a large memory copy."""
    peak_flops: float      # operations per second of a 1024 x 1024 float32 matrix product
    bandwidth: float       # bytes per second read + written by copying a 256 MB array
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
