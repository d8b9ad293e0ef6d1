"""The sections of the explainer, in the order data flows through the model.

A section is its own files plus one entry here: a module in web/sections/ (its parameters and
`build`), a partial template templates/sections/<id>.html, its figure builders, and

    Section(id="embeddings", title="Embeddings",
            template="sections/embeddings.html",     # renders <section id="embeddings">…
            params=(Param("emb_k", "Neighbours", kind="int", default=5, min=1, max=20),),
            build=embeddings.build,                  # build(lm, state) -> dict
            tour="Each id selects one row of a big table ...")   # its step of the guided tour

`build` reads the validated `state` (the prompt and this section's own parameters), runs the
pipeline, calls figure builders, and returns the template's context. It may call
`state.reject(name, message)` for a value that only turns out to be wrong once the prompt is
known (an index past the end of the prompt, say). The page, the section's own route
`/section/<id>`, the header nav, the tour and the validation of its parameters all come from
SECTIONS (read through `sections()` when a request comes); nothing else needs to change.
"""
from dataclasses import dataclass, field
from typing import Callable

from web.overview import PARAMS as OVERVIEW_PARAMS
from web.params import PROMPT
from web.sections import (attention, batching, block, decoding, embeddings, feedforward,
                          generation, kvcache, logits, positions, quantization, roofline, sampling,
                          speculative, tiling, tokenization)
from web.tour import PAGE_PARAMS


@dataclass(frozen=True)
class Section:
    id: str                 # HTML id, route /section/<id>, nav anchor
    title: str              # heading, nav label and tour step title
    template: str           # partial template, used by the page and as the htmx swap
    params: tuple           # the Params this section owns (the prompt is shared by all)
    build: Callable         # build(lm, state) -> template context (a dict); lm: the loaded
                            #   model (web.loaded.LoadedModel), lm.model the pipeline model
    tour: str = field(kw_only=True)   # the text of its step in the guided tour (required)
    warm: Callable = None   # warm(lm): fill prompt-independent caches and make its timing
                            #   measurements; web/serving.py runs it once, in the process that
                            #   loaded the model, before the workers are forked (one process: in
                            #   a background thread at start); None: nothing to warm
    borrows: tuple = ()     # names of other sections' parameters this section uses and whose
                            #   messages it shows too (they count in its answer's status)
    reads: tuple = ()       # other sections' parameters its build reads without showing their
                            #   messages (they key its cached result: web.cache.cached_build)


SECTIONS = (
    Section("tokenization", "Tokenization", "sections/tokenization.html",
            tokenization.PARAMS, tokenization.build,
            tour=(
                "The model cannot read letters. A tokenizer cuts the text into pieces from a "
                "fixed vocabulary and replaces each piece by its number (its id). The vocabulary "
                "was learned by byte-pair encoding: start from single bytes, and repeatedly glue "
                "together the pair that occurs most often. Watch the real merges rebuild a word "
                "of your prompt.")),
    Section("embeddings", "Embeddings", "sections/embeddings.html",
            embeddings.PARAMS, embeddings.build, warm=embeddings.warm,
            tour=(
                "Each id selects one row of a big table: a vector of a few hundred numbers, "
                "learned in training. Tokens used in similar ways end up with similar vectors. "
                "Here is that table squeezed to two dimensions, with your tokens on it and their "
                "nearest neighbours.")),
    Section("positions", "Positions", "sections/positions.html",
            positions.PARAMS, positions.build, warm=positions.warm,
            tour=(
                "A vector says which token, not where it is. Order enters through positions: "
                "older models add a position vector, Llama-style models rotate the queries and "
                "keys by an angle that grows with the position (RoPE), so attention scores depend "
                "on how far apart two tokens are. See it, and see what is lost when positions are "
                "removed.")),
    Section("block", "The transformer block", "sections/block.html",
            block.PARAMS, block.build,
            tour=(
                "The vectors now pass through a stack of identical blocks. Each block reads the "
                "running sum of vectors (the residual stream), lets tokens exchange information "
                "(attention), transforms each token on its own (feed-forward), and adds the "
                "results back. The shapes and the parameter counts are those of the model in "
                "memory.")),
    Section("attention", "Attention", "sections/attention.html",
            attention.PARAMS, attention.build,
            tour=(
                "Attention is where tokens look at each other. Each token asks a question "
                "(query), every earlier token offers a label (key), and the match decides how "
                "much of each earlier token's content (value) is copied. Click a token to see "
                "whom it attends to, in every head of every layer.")),
    Section("feedforward", "Feed-forward", "sections/feedforward.html",
            feedforward.PARAMS, feedforward.build,
            tour=(
                "After attention, each token's vector goes through a small two-layer network of "
                "its own, with a non-linearity in the middle. This is where most of the "
                "parameters live. See the real activations of one token and which neurons fire "
                "the most.")),
    Section("logits", "Logits and softmax", "sections/logits.html",
            logits.PARAMS, logits.build, warm=logits.warm,
            tour=(
                "The last vector is compared with every token of the vocabulary: one score "
                "(logit) each. Softmax turns the scores into probabilities that add up to one. "
                "Temperature sharpens or flattens them. Before you look: which token do you think "
                "comes first?")),
    Section("sampling", "Sampling", "sections/sampling.html",
            sampling.PARAMS, sampling.build,
            tour=(
                "A probability list is not yet a word. The sampler picks one token from it, after "
                "a chain of filters: repetition penalty, temperature, top-k, top-p, min-p. Move "
                "each knob and watch which tokens it removes, in the order the filters act.")),
    Section("decoding", "Greedy vs beam search", "sections/decoding.html",
            decoding.PARAMS, decoding.build, warm=decoding.warm,
            reads=generation.BORROWED,          # the samples beside the beams use the sampler
            tour=(
                "Choosing the best token at each step (greedy) does not always give the most "
                "probable whole sentence. Beam search keeps several candidates alive and compares "
                "their total probability. The tree shows every branch it explored and which ones "
                "it dropped.")),
    Section("generation", "Generation loop", "sections/generation.html",
            generation.PARAMS, generation.build, warm=generation.warm,
            borrows=generation.BORROWED,
            tour=(
                "Generation is a loop: run the model, pick a token, append it, run again. The "
                "first pass reads the whole prompt at once (prefill); every later pass adds one "
                "token (decode). Watch the answer stream in, token by token, with the time each "
                "step took.")),
    Section("kvcache", "KV cache", "sections/kvcache.html",
            kvcache.PARAMS, kvcache.build, warm=kvcache.warm,
            tour=(
                "Each decode step needs the keys and values of every earlier token. Recomputing "
                "them every time would be wasteful, so they are kept: the KV cache. It makes "
                "decoding fast and costs memory, which grows with every token. See both, "
                "measured.")),
    Section("batching", "Batching", "sections/batching.html",
            batching.PARAMS, batching.build, warm=batching.warm,
            tour=(
                "A server answers many people at once. Several sequences can share one decode "
                "step: the weights are read once for all of them, so on hardware that waits on "
                "memory a batch can cost little more than one sequence. The section measures what "
                "a batch costs on this server, and how requests sharing the slots decides the "
                "throughput and the waiting times.")),
    Section("quantization", "Quantization", "sections/quantization.html",
            quantization.PARAMS, quantization.build, warm=quantization.warm,
            tour=(
                "Weights can be stored with fewer bits: 8 or 4 instead of 32. The model gets "
                "smaller and faster to read, and a little less exact. See how much memory is "
                "saved and how much the answers change, on the running model.")),
    Section("speculative", "Speculative decoding", "sections/speculative.html",
            speculative.PARAMS, speculative.build, warm=speculative.warm,
            tour=(
                "A small, fast draft guesses a few tokens ahead; the big model checks all the "
                "guesses in one pass and keeps those it agrees with. The output follows the big "
                "model's probabilities exactly, and it can arrive sooner: when checking several "
                "tokens costs about one step and the guesses are often right. The section "
                "measures whether it does here.")),
    Section("tiling", "Attention tiling", "sections/tiling.html",
            tiling.PARAMS, tiling.build,
            tour=(
                "On a GPU, moving data costs more than computing with it. FlashAttention computes "
                "attention in tiles with a running softmax, so the full table of scores is never "
                "written to slow memory. Same result, much less traffic.")),
    Section("roofline", "Prefill vs decode: the roofline", "sections/roofline.html",
            roofline.PARAMS, roofline.build, warm=roofline.warm,
            tour=(
                "Why is reading the prompt fast and writing the answer slow? The prefill does "
                "many operations per byte of weights it reads; a decode step very few. The "
                "roofline shows which limit, arithmetic or memory, each phase hits on real "
                "chips.")),
)


def sections() -> tuple:
    """The registered sections, in page order (read at each request, so that a test can
    register one more)."""
    return SECTIONS


def all_params() -> list:
    """The prompt, the page's own (tour, presentation mode, theme), the overview's
    (web/overview.py), then every section's parameters, in page order; names must be unique."""
    params = [PROMPT, *PAGE_PARAMS, *OVERVIEW_PARAMS] + [p for s in SECTIONS for p in s.params]
    names = [p.name for p in params]
    assert len(names) == len(set(names)), f"duplicate parameter names in {names}"
    return params


def section(section_id: str):
    return next((s for s in sections() if s.id == section_id), None)


# --- a section that reads another's parameters follows its changes ---------------------------
# When one of a section's own controls changed, its answer names an event (views.section:
# HX-Trigger-After-Swap); each section whose build reads that section's parameters (`reads`)
# fetches itself again on it, through an element whose hx-trigger is refresh_trigger(section).

def changed_event(section_id: str) -> str:
    return f"{section_id}-changed"


def owners(names) -> list:
    """The sections owning any of these parameter names."""
    names = set(names)
    return [s for s in sections() if names & {p.name for p in s.params}]


def readers(s) -> list:
    """The sections whose build reads one of section s's own parameters."""
    own = {p.name for p in s.params}
    return [t for t in sections() if own & set(t.reads)]


def refresh_trigger(s) -> str:
    """The hx-trigger through which section s follows the sections whose parameters it reads:
    "<owner>-changed from:body" for each ("" when it reads none)."""
    return ", ".join(f"{changed_event(o.id)} from:body" for o in owners(s.reads))
