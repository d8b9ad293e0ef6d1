"""The glossary: one plain definition for every technical term the page uses.

The page (the `term` macro in templates/macros.html), the guided tour and the presentation slides
(web/presentation/tour.py) all read their definitions from GLOSSARY; nothing repeats one. A
definition is one
or two short sentences, with no numbers that are not facts of the formula, so that it stays true
for every model the page can run.

ALIASES: the other ways the page writes a term (case does not matter), used to find a term's
first use in a tour text.
"""
import re

GLOSSARY = {

    "BPE": "Byte-pair encoding: a tokenizer that starts from single bytes and repeatedly glues "
           "together the pair of pieces that occurs most often in its training text.",
    "embedding": "The vector of numbers, learned in training, that a token's id selects from a "
                 "table: one row per vocabulary entry.",
    "RoPE": "Rotary position embedding: the queries and keys are rotated by an angle that grows "
            "with the token's position, so an attention score depends on how far apart two "
            "tokens are.",
    "causal mask": "The rule that a token may only attend to itself and earlier tokens: the "
                   "scores of later positions are set to minus infinity before the softmax.",
    "residual stream": "The running sum of vectors, one per token, that every block reads and "
                       "adds its output to.",
    "LayerNorm": "Layer normalisation: subtract a vector's mean, divide by its standard "
                 "deviation, then scale and shift each entry by learned weights.",
    "RMSNorm": "Root-mean-square normalisation: divide a vector by the square root of the mean "
               "of its squared entries, then scale each entry by a learned weight. Like "
               "LayerNorm without subtracting the mean.",

    "grouped-query attention": "Attention in which several query heads share one key/value "
                               "head, so fewer keys and values are computed and cached.",
    "KV cache": "The keys and values of every token already processed, kept in memory so that "
                "each new token only computes its own instead of recomputing all of them.",
    "SwiGLU": "A feed-forward layer with two input projections: one goes through the SiLU "
              "function (x times sigmoid of x) and multiplies the other, entry by entry, "
              "before the output projection.",
    "GELU": "Gaussian error linear unit: a smooth non-linearity, x times the probability that "
            "a standard normal variable is below x; near zero for negative inputs, near x for "
            "large positive ones.",
    "logits": "The raw scores the model gives every token of the vocabulary for being next: "
              "one number each, any size, before softmax turns them into probabilities.",
    "softmax": "Turns scores into probabilities: take e to the power of each score and divide "
               "by the sum of them all, so they are positive and add up to one.",
    "temperature": "A number the logits are divided by before the softmax: below one sharpens "
                   "the probabilities towards the top token, above one flattens them.",
    "perplexity": "e to the mean negative log-probability the model gave the actual next tokens: "
                  "the number of equally likely choices the model is, on average, as unsure "
                  "as. Lower is better.",
    "prefill": "The first pass of generation: the whole prompt goes through the model at once, "
               "filling the KV cache and scoring the first new token.",
    "decode": "Every later pass of generation: one new token goes through the model, reading "
              "the KV cache of all the tokens before it.",
    "quantization": "Storing weights (or the cache) with fewer bits per number, each group "
                    "sharing a scale, so the model takes less memory and is faster to read, "
                    "and a little less exact.",
    "FLOP per byte": "Arithmetic intensity: how many arithmetic operations a computation does "
                     "for each byte it reads from memory.",
    "roofline": "A chart of the fastest a chip can run a computation: limited by memory "
                "bandwidth when it does few operations per byte, by peak arithmetic speed when "
                "it does many.",
    "ridge point": "The operations per byte at which a chip's two limits meet: the peak "
                   "arithmetic speed divided by the memory bandwidth. Below it, memory is the "
                   "bottleneck; above it, arithmetic.",

    "beam search": "A decoding method that keeps the few most probable partial sequences at "
                   "each step, instead of only the single best token.",
    "speculative decoding": "A small draft model guesses a few tokens; the big model checks "
                            "them all in one pass and keeps those it agrees with, so the output "
                            "follows the big model exactly.",
    "FlashAttention": "A way to compute attention in tiles, with a softmax updated as each tile "
                      "arrives, so the full table of scores is never written to slow memory.",

    # text, tokens and vectors
    "UTF-8": "The usual way to store text as bytes: one byte for an English letter or digit, "
             "two to four for other characters and emoji.",
    "cosine similarity": "How alike two vectors' directions are: their dot product divided by "
                         "both lengths; 1 is the same direction, 0 unrelated, -1 opposite.",
    "PCA": "Principal component analysis: the directions along which a set of vectors varies "
           "most; projected on the first two, the vectors are drawn flat keeping as much of "
           "their spread as a flat picture can.",
    "tied embeddings": "The model scores the next token with its embedding table itself "
                       "(transposed) instead of a separate unembedding matrix, so it is stored "
                       "once.",
    "unembedding": "The last matrix of the model: it turns the final vector of a token into "
                   "one score (logit) per token of the vocabulary.",

    # positions and attention
    "NoPE": "No positional encoding: a model given no position information at all; the causal "
            "mask alone lets it tell where a token is.",
    "sinusoidal encoding": "The original Transformer's positions: sines and cosines of the "
                           "position at fixed frequencies, added to the token's embedding.",
    "attention head": "One of a layer's parallel attentions: its own query, key and value "
                      "projections, so that each head can look for something different.",
    "induction head": "An attention head that finds an earlier copy of the current token and "
                      "attends to the token after it, so the model can continue a repeated "
                      "pattern.",
    "activation cache": "Every intermediate tensor of one forward pass, kept under a stable "
                        "name (hook_q: the queries, hook_pattern: the attention weights...) so "
                        "the page can show it.",
    "logit lens": "Reading the residual stream after an earlier block through the final norm "
                  "and the unembedding, as if the model stopped there.",
    "SiLU": "x times sigmoid(x): near 0 for negative x, near x for large positive x; the gate "
            "of SwiGLU.",

    # choosing the next token
    "entropy": "How spread a distribution is: minus the sum of p times log2 p, in bits. 0 bits: "
               "one certain token; n bits: as unsure as a fair choice among 2^n tokens.",
    "greedy": "Decoding that always takes the single most probable next token (temperature 0).",
    "top-k": "A sampling rule: keep only the k most probable tokens, rescale their "
             "probabilities to add up to one, and draw among them.",
    "top-p": "Nucleus sampling: keep the most probable tokens until their probabilities add up "
             "to p, rescale them to add up to one, and draw among them.",
    "min-p": "A sampling rule: drop every token whose probability is below min-p times the top "
             "token's probability.",
    "repetition penalty": "Makes tokens already in the text less likely: their logits are "
                          "divided by the penalty when positive, multiplied by it when "
                          "negative.",
    "seed": "The number a random generator starts from: the same seed gives the same draws, so "
            "a sampled text can be reproduced.",
    "chi-square test": "Pearson's test of whether counted draws fit the expected probabilities: "
                       "the sum of (observed - expected)^2 / expected, turned into a p-value.",

    # number formats and files
    "float32": "A 32-bit floating-point number (4 bytes), about 7 significant decimal digits: "
               "what NumPy computes in here.",
    "fp16": "A 16-bit floating-point number (2 bytes, 5 exponent and 10 mantissa bits): about "
            "3 significant digits, largest value 65,504.",
    "bf16": "bfloat16: a 16-bit float with float32's 8 exponent bits and 7 mantissa bits: "
            "float32's range with less precision.",
    "fp8": "An 8-bit floating-point number (formats E4M3 or E5M2), used on recent GPUs for "
           "weights, activations or the KV cache.",
    "int8": "An 8-bit whole number, -128 to 127. Quantized, a weight is such a code times a "
            "scale shared by its group.",
    "int4": "A 4-bit whole number: 16 levels. Quantized, a weight is such a code read back "
            "through its group's scale and zero point.",
    "nbytes": "NumPy's count of the bytes an array's numbers take: entries times bytes per "
              "entry (4 for float32).",
    "GGUF": "llama.cpp's one-file model format: the configuration, the tokenizer and every "
            "tensor, each in its own type (a float, or a block-quantized one such as Q4_1).",
    "Q4_1": "A GGUF block type: each block of 32 weights holds an fp16 scale d, an fp16 minimum "
            "m and 32 4-bit codes q (20 bytes); a weight is d times q plus m.",
    "Q8_0": "A GGUF block type: each block of 32 weights holds an fp16 scale d and 32 signed "
            "8-bit codes q (34 bytes); a weight is d times q.",
    "safetensors": "Hugging Face's tensor file format: a JSON header with each tensor's name, "
                   "type and shape, then the raw numbers.",
    "dequantize": "Turn stored codes back into numbers: scale times (code - zero point) here, "
                  "d times q plus m in a Q4_1 block.",
    "zero point": "In asymmetric quantization, the code that stands for 0: weight = scale "
                  "times (code - zero point), so a group's codes span its minimum to its "
                  "maximum.",
    "GPTQ": "A way to quantize a trained model's weights: it rounds one column at a time and "
            "adjusts the columns not yet rounded to cancel the error, measured on sample "
            "text.",
    "AWQ": "Activation-aware weight quantization: the few weight channels that meet large "
           "activations are scaled up before rounding to 4 bits, so they lose less.",
    "held-out": "Text the model was not trained on: how well it predicts such text measures "
                "what it learned, not what it memorised.",

    # serving and hardware
    "BLAS": "Basic Linear Algebra Subprograms: the library NumPy calls for matrix products "
            "(OpenBLAS here); its threads are the CPU cores one product is split over.",
    "FLOP": "One floating-point operation (an add or a multiply). MFLOP, GFLOP and TFLOP: a "
            "million, a billion, a trillion of them.",
    "HBM": "High-bandwidth memory: the stacked memory chips beside a data-center GPU; its "
           "large, slow memory, where weights and the KV cache live.",
    "SRAM": "The small, fast memory on the processor itself; on a GPU, each streaming "
            "multiprocessor's shared memory and caches.",
    "streaming multiprocessor": "One of the many processor blocks (SMs) of an NVIDIA GPU, each "
                                "with its own arithmetic units and small fast on-chip memory.",
    "throughput": "Work done per unit of time: here, tokens generated per second over all "
                  "requests together.",
    "latency": "How long one request waits from its arrival to its last token.",
    "static batching": "Requests start together as a batch and the batch ends when its longest "
                       "request does; slots of finished requests stay idle.",
    "continuous batching": "A finished request leaves the batch at once and a waiting one takes "
                           "its slot at the next step.",
    "paged KV cache": "The KV cache kept in fixed-size blocks found through a block table, as "
                      "virtual memory pages are, so no request reserves its whole maximum "
                      "length.",
    "draft model": "The small, fast model of speculative decoding that guesses the next few "
                   "tokens for the big one to check.",
    "prompt lookup": "Drafting without a draft model: the last few tokens are looked up "
                     "earlier in the text, and the tokens that followed them are proposed.",
    "online softmax": "A softmax computed as the scores arrive: a running maximum and a "
                      "running sum, rescaled whenever the maximum grows.",
}

ALIASES = {
    "BPE": ("byte-pair encoding",),
    "embedding": ("embeddings",),
    "grouped-query attention": ("grouped-query",),
    "RoPE": ("rotary position embedding",),
    "logits": ("logit",),
    "FLOP per byte": ("FLOPs per byte", "operations per byte of weights",
                      "operations per byte", "arithmetic intensity"),
    "ridge point": ("ridge",),
    "causal mask": ("masked", "mask"),
    "tied embeddings": ("embeddings are tied",),
    "sinusoidal encoding": ("sinusoidal encodings", "sinusoidal"),
    "attention head": ("attention heads",),
    "induction head": ("induction heads", "induction"),
    "greedy": ("greedily",),
    "seed": ("seeded",),
    "chi-square test": ("chi-square",),
    "fp16": ("float16", "FP16"),
    "bf16": ("bfloat16",),
    "dequantize": ("dequantized",),
    "zero point": ("zero points",),
    "FLOP": ("FLOPs", "MFLOP", "GFLOP/s", "TFLOP/s", "GFLOP", "TFLOP"),
    "paged KV cache": ("paged KV memory", "paged"),
}


def anchor(key: str) -> str:
    """The id of the element that holds `key`'s definition on the page."""
    return "def-" + re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")


def _pattern(key: str):
    words = sorted((key, *ALIASES.get(key, ())), key=len, reverse=True)
    return re.compile(r"(?<![\w-])(%s)(?![\w-])" % "|".join(map(re.escape, words)), re.I)


PATTERNS = {key: _pattern(key) for key in GLOSSARY}


def mark_first_uses(texts, seen=None) -> list:
    """Each text cut into pieces ("text", s) and ("term", s, key): a glossary term's first use
    over all the texts, in order, becomes a "term" piece (its definition: GLOSSARY[key]); later
    uses stay text. `seen`: keys already defined (they are not marked again)."""
    seen = set() if seen is None else seen
    out = []
    for text in texts:
        found = []                                   # (start, end, key), first use per text
        for key, pat in PATTERNS.items():
            if key in seen:
                continue
            m = pat.search(text)
            if m:
                found.append((m.start(), m.end(), key))
        pieces, at = [], 0
        for start, end, key in sorted(found):
            if start < at:                           # overlaps a term already marked
                continue
            pieces.append(("text", text[at:start]))
            pieces.append(("term", text[start:end], key))
            seen.add(key)
            at = end
        pieces.append(("text", text[at:]))
        out.append([p for p in pieces if p[1]])
    return out
