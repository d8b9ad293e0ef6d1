"""The glossary: one plain definition for every technical term the page uses.

The page (the `term` macro in templates/macros.html), the guided tour and the presentation slides
(web/tour.py) all read their definitions from GLOSSARY; nothing repeats one. A definition is one
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
}


def definition(key: str) -> str:
    """The definition of `key` (KeyError for a term not in the glossary: a typo is caught)."""
    return GLOSSARY[key]


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
