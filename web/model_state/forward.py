"""The model's forward pass over the prompt, shared by every section that reads it.

Embeddings, positions, the block, attention, feed-forward and logits all show intermediates of
the same pass. `prompt_run(lm, prompt)` runs it once (with the activation cache) and keeps the
last few results, so a page render with six such sections costs one forward pass, and a slider
that only changes what is drawn costs none. Results are shared between requests: treat the
arrays as read-only.
"""
from dataclasses import dataclass

import numpy as np

from web.core.cache import memo, model_key
from web.model_state.explainer import is_big

KEEP = 16             # prompts remembered (a 256-token cache of the default model is ~5 MB)
# A big model's runs are compact (pipeline.activations.ActivationCache: each block's input
# kept, the rest computed again when read; SmolLM2's 21-token page 4.7 MB instead of 34 MB) and kept
# within a byte budget per worker, whatever their number: 160 MB holds a class of 30's prompts
# (a run missed is a prompt run again on every control: bench/bench_demand.py), and the server
# stays under 2 GB with both workers (bench/load_test.py reads its Pss).
KEEP_BIG = 64
KEEP_BIG_BYTES = 160 * 2**20


@dataclass(frozen=True)
class PromptRun:
    ids: tuple               # the prompt's token ids (encoded as ordinary text)
    next_logits: np.ndarray  # [V]: the scores for the token after the prompt
    cache: object            # activation name -> array (see pipeline.model's docstring)

    @property
    def logits(self) -> np.ndarray:
        """[T, V]: the scores after every position (a compact run computes them when read)."""
        return self.cache["logits"]

    def nbytes(self) -> int:
        return self.next_logits.nbytes + self.cache.nbytes()


_runs = memo("prompt runs", KEEP, KEEP_BIG, big_bytes=KEEP_BIG_BYTES, weigh=PromptRun.nbytes)


def prompt_ids(lm, prompt: str) -> tuple:
    """The token ids the model reads for the prompt: user text is never a special token."""
    return tuple(lm.tokenizer.encode_ordinary(prompt))


def run_prompt(model, ids: tuple) -> PromptRun:
    logits, cache = model.run_with_cache(list(ids), compact=is_big(model))
    for a in (logits, *cache.computed()):       # a lazy value is read-only once computed
        a.flags.writeable = False
    return PromptRun(ids, logits[-1], cache)


def ids_run(model, ids: tuple) -> PromptRun:
    """The run of these token ids, computed once per (model, ids): a compact recording for a
    big model (web.model_state.explainer.BIG_MODEL_PARAMS)."""
    return _runs.get((model_key(model), tuple(ids)), lambda: run_prompt(model, tuple(ids)))


def prompt_run(lm, prompt: str) -> PromptRun:
    """logits and the activation cache of the prompt, computed once per (model, prompt)."""
    return ids_run(lm.model, prompt_ids(lm, prompt))


def prefilled(model, ids: tuple, capacity: int = 64) -> tuple:
    """(a KV cache holding the prompt, the next token's logits [V]): what `Model.prefill` of
    the prompt gives, taken from the prompt's shared run instead of running it again. Each call
    gets its own cache to append to. For loops that are not timed (a timed loop runs its own
    prefill, so that its prefill time is measured)."""
    run = ids_run(model, ids)
    return model.kv_from_recording(run.cache, len(ids), capacity), run.next_logits
