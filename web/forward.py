"""The model's forward pass over the prompt, shared by every section that reads it.

Embeddings, positions, the block, attention, feed-forward and logits all show intermediates of
the same pass. `prompt_run(lm, prompt)` runs it once (with the activation cache) and keeps the
last few results, so a page render with six such sections costs one forward pass, and a slider
that only changes what is drawn costs none. Results are shared between requests: treat the
arrays as read-only.
"""
from dataclasses import dataclass

import numpy as np

from web.cache import memo, model_key

KEEP = 16             # prompts remembered (a 256-token cache of the default model is ~5 MB)
KEEP_BIG = 2          # for a big model (SmolLM2's activations of a 128-token prompt: ~150 MB)


@dataclass(frozen=True)
class PromptRun:
    ids: tuple            # the prompt's token ids (encoded as ordinary text)
    logits: np.ndarray    # [T, V]
    cache: dict           # activation name -> array (see pipeline.model's docstring)


_runs = memo("prompt runs", KEEP, KEEP_BIG)


def prompt_ids(lm, prompt: str) -> tuple:
    """The token ids the model reads for the prompt: user text is never a special token."""
    return tuple(lm.tokenizer.encode_ordinary(prompt))


def run_prompt(lm, prompt: str) -> PromptRun:
    ids = prompt_ids(lm, prompt)
    logits, cache = lm.model.run_with_cache(list(ids))
    for a in (logits, *cache.computed()):       # a lazy value, computed when read, is new
        a.flags.writeable = False
    return PromptRun(ids, logits, cache)


def prompt_run(lm, prompt: str) -> PromptRun:
    """logits and the activation cache of the prompt, computed once per (model, prompt)."""
    return _runs.get((model_key(lm.model), prompt), lambda: run_prompt(lm, prompt))
