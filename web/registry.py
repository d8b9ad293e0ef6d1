"""The sections of the explainer, in the order data flows through the model.

A section is a view + a partial template + its figure builders, registered here:

    Section(id="embeddings", title="Embeddings",
            template="sections/embeddings.html",     # renders <section id="embeddings">…
            params=(Param("emb_k", "Neighbours", kind="int", default=5, min=1, max=20),),
            build=embeddings.build)                  # build(lm, state) -> dict

`build` reads the validated `state` (the prompt and this section's own parameters), runs the
pipeline, calls figure builders, and returns the template's context. It may call
`state.reject(name, message)` for a value that only turns out to be wrong once the prompt is
known (an index past the end of the prompt, say). The page, the section's own route
`/section/<id>` and the header nav all come from SECTIONS; nothing else needs to change.
"""
from dataclasses import dataclass
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
    title: str              # heading and nav label
    template: str           # partial template, used by the page and as the htmx swap
    params: tuple           # the Params this section owns (the prompt is shared by all)
    build: Callable         # build(lm, state) -> template context (a dict); lm: the loaded
                            #   model (web.loaded.LoadedModel), lm.model the pipeline model
    warm: Callable = None   # warm(lm): fill prompt-independent caches; run once per
                            #   process, before app.py's workers serve (one process: in a
                            #   background thread at start); None: nothing to warm
    borrows: tuple = ()     # names of other sections' parameters this section uses and whose
                            #   messages it shows too (they count in its answer's status)


SECTIONS = (
    Section("tokenization", "Tokenization", "sections/tokenization.html",
            tokenization.PARAMS, tokenization.build),
    Section("embeddings", "Embeddings", "sections/embeddings.html",
            embeddings.PARAMS, embeddings.build),
    Section("positions", "Positions", "sections/positions.html",
            positions.PARAMS, positions.build),
    # --- block (helper "block"): after positions, before attention ---
    Section("block", "The transformer block", "sections/block.html", block.PARAMS, block.build),
    # --- attention, feed-forward (helper "attnffn"): after block, before logits ---
    Section("attention", "Attention", "sections/attention.html",
            attention.PARAMS, attention.build),
    Section("feedforward", "Feed-forward", "sections/feedforward.html",
            feedforward.PARAMS, feedforward.build),
    # --- logits (helper "block"): after feed-forward, before sampling ---
    Section("logits", "Logits and softmax", "sections/logits.html", logits.PARAMS, logits.build),
    # --- sampling, greedy vs beam search (helper "sampling"): after logits ---
    Section("sampling", "Sampling", "sections/sampling.html", sampling.PARAMS, sampling.build),
    Section("decoding", "Greedy vs beam search", "sections/decoding.html",
            decoding.PARAMS, decoding.build),
    # --- generation loop (helper "genloop"): after decoding, before the KV cache ---
    Section("generation", "Generation loop", "sections/generation.html",
            generation.PARAMS, generation.build, borrows=generation.BORROWED),
    # --- KV cache, batching (helper "kvbatch"): after the generation loop ---
    Section("kvcache", "KV cache", "sections/kvcache.html", kvcache.PARAMS, kvcache.build),
    Section("batching", "Batching", "sections/batching.html", batching.PARAMS, batching.build,
            warm=batching.warm),
    # --- quantization, speculative decoding (helper "quantspec"): after batching ---
    Section("quantization", "Quantization", "sections/quantization.html",
            quantization.PARAMS, quantization.build, warm=quantization.warm),
    Section("speculative", "Speculative decoding", "sections/speculative.html",
            speculative.PARAMS, speculative.build),
    # --- attention tiling, roofline (lead): last, after speculative decoding ---
    Section("tiling", "Attention tiling", "sections/tiling.html",
            tiling.PARAMS, tiling.build),
    Section("roofline", "Prefill vs decode: the roofline", "sections/roofline.html",
            roofline.PARAMS, roofline.build),
)


def all_params() -> list:
    """The prompt, the page's own (tour, presentation mode, theme), the overview's
    (web/overview.py), then every section's parameters, in page order; names must be unique."""
    params = [PROMPT, *PAGE_PARAMS, *OVERVIEW_PARAMS] + [p for s in SECTIONS for p in s.params]
    names = [p.name for p in params]
    assert len(names) == len(set(names)), f"duplicate parameter names in {names}"
    return params


def section(section_id: str):
    return next((s for s in SECTIONS if s.id == section_id), None)
