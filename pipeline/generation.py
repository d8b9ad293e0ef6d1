"""The generation loop, one step at a time: what the model reads, what it predicts, what is kept.

    prompt ids --prefill--> logits of the last position --sample--> token 1 --append-->
    token 1 --decode (KV cache)--> logits --sample--> token 2 --append--> ... until the
    end-of-text token, the token limit, or a full context window.

`decode_loop` is the loop itself, the only one in the app that runs a single sequence: it
yields a `Pass` per new token (its input, the logits, the chosen token, the wall-clock time of
the model pass, why it stopped) and leaves the choice of the token to the caller's `sample`.
`generation_steps` keeps what a learner wants to see: the model's top candidates and the chosen
token's probability.

`finish_reason` holds the stop rules (end-of-text, a full context window, the new-token limit);
the loops that run several sequences at once (beam search and continue_batch in
pipeline/decoding.py, speculative decoding in pipeline/speculative.py) stop by it too.

Stopping early: closing the generator (`steps.close()`, or a WSGI server closing the response
when the client went away) ends the work at the step being yielded; `should_stop()` is asked
before every model pass, for a stop that comes from another thread.

`TextStream` turns token ids into text as they arrive without ever splitting a character: a
token may end in the middle of a multi-byte UTF-8 character, and those bytes are held back until
the token that completes them.
"""
import codecs
import time
from dataclasses import dataclass

import numpy as np

from pipeline.model import softmax
from pipeline.ranking import top_k
from pipeline.sampling import greedy
from pipeline.tokenizer import id_bytes


@dataclass(frozen=True)
class LoopStep:
    """What every step of the loop has, kept or shown."""
    index: int              # 0 for the first new token (the one chosen after the prefill)
    phase: str              # "prefill": the whole prompt in one pass; "decode": one new token
    input_ids: tuple        # the tokens run through the model at this step
    n_context: int          # tokens the model attends over at this step (cache + input)
    token: int              # the chosen token, appended to the sequence
    forward_seconds: float  # wall time of the model pass (prefill or one decode step)
    step_seconds: float     # the pass plus choosing the token
    finish: str             # on the last step: "eos", "limit" or "context"; else None


@dataclass(frozen=True)
class Step(LoopStep):
    """A step as the page shows it (generation_steps): the logits summed up, not kept."""
    prob: float             # the model's probability of the token (softmax of the logits, T = 1)
    top: tuple              # the model's top candidates: ((id, prob), ...), most probable first


def top_candidates(probs, k: int) -> tuple:  # [V] -> ((id, prob), ...) k most probable
    return tuple((int(i), float(probs[i])) for i in top_k(probs, k))   # ties by id


def finish_reason(token, n_tokens: int, n_new: int, max_new_tokens: int, n_ctx: int,
                  eos=None):
    """Why generation ends once `token` is appended, or None to go on: every loop's stop rules.

    "eos": `token` is the end-of-text token (eos None: it does not stop generation);
    "context": the sequence, `token` included, is `n_tokens` > n_ctx long: `token` was chosen
        after a full window of n_ctx positions, and no position is left to read it back;
    "limit": `n_new` new tokens have been made, the most asked for.
    """
    if eos is not None and token == eos:
        return "eos"
    if n_tokens > n_ctx:
        return "context"
    if n_new >= max_new_tokens:
        return "limit"
    return None


def most_new_tokens(n_prompt: int, n_ctx: int) -> int:
    """How many new tokens the context rule of finish_reason allows after an n_prompt-token
    prompt: the free positions, plus one (the last token is never read back)."""
    return max(0, n_ctx - n_prompt + 1)


@dataclass(frozen=True)
class Pass(LoopStep):
    """A step as decode_loop yields it, with the model's scores."""
    logits: np.ndarray      # [V] the model's scores for the next token
    cache: dict = None      # record=True, decode steps: the step's own intermediates (one row)
    kv: object = None       # record=True: the loop's KVCache (its first n_context positions are
                            #   this step's; later steps only append)


def decode_loop(model, prompt_ids, max_new_tokens: int, sample=None, stop_at_eos: bool = True,
                should_stop=None, record: bool = False, start=None):
    """Prefill the prompt, then choose a token and decode it, until finish_reason says stop.

    `sample(logits [V], tokens_so_far: list[int]) -> int` picks each token (greedy when None).
    Yields a Pass per new token; `should_stop()`, when given, is asked before every model pass.
    record=True: each decode step's Pass holds that step's activation cache and the KV cache.
    start: (KV cache holding the prompt, its logits [V]) when the prompt was already run
    (Model.kv_from_recording): the prefill pass is not run again, and its times are NaN (not
    measured here).
    """
    sample = sample or greedy
    history = [int(t) for t in prompt_ids]
    eos = model.config.eos_token_id if stop_at_eos else None
    kv = model.new_kv_cache() if start is None else start[0]
    inputs, phase = tuple(history), "prefill"
    for index in range(max_new_tokens):
        if should_stop is not None and should_stop():
            return
        cache = {} if record and phase == "decode" else None
        began = time.perf_counter()
        if phase == "prefill" and start is not None:
            logits = start[1]
        elif phase == "prefill":
            logits = model.prefill(list(inputs), kv)[-1]                       # [V]
        elif cache is None:
            logits = model.decode(inputs[0], kv)
        else:
            logits = model.decode(inputs[0], kv, cache=cache)
        forward = time.perf_counter() - began
        token = int(sample(logits, history))
        step_seconds = time.perf_counter() - began
        if phase == "prefill" and start is not None:
            forward = step_seconds = float("nan")
        history.append(token)
        finish = finish_reason(token, len(history), index + 1, max_new_tokens,
                               model.config.n_ctx, eos)
        yield Pass(index, phase, inputs, len(kv), token, forward, step_seconds, finish, logits,
                   cache, kv if record else None)
        if finish:
            return
        inputs, phase = (token,), "decode"


def generation_steps(model, prompt_ids, max_new_tokens: int, sample=None, n_top: int = 5,
                     stop_at_eos: bool = True, should_stop=None, start=None):
    """Yield a Step per new token: decode_loop's passes with the model's probabilities
    (start: the prompt already run, as for decode_loop)."""
    for p in decode_loop(model, prompt_ids, max_new_tokens, sample, stop_at_eos, should_stop,
                         start=start):
        probs = softmax(p.logits)                                     # [V]
        yield Step(p.index, p.phase, p.input_ids, p.n_context, p.token, p.forward_seconds,
                   p.step_seconds, p.finish, prob=float(probs[p.token]),
                   top=top_candidates(probs, n_top))


class TextStream:
    """Token ids in, text out, never half a character: incomplete UTF-8 bytes wait for the rest.

    `push(id)` returns the text that is complete so far (possibly ""); `flush()` ends the
    stream, turning bytes that never completed into U+FFFD.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token: int) -> str:
        return self.utf8.decode(id_bytes(self.tokenizer, token))

    def flush(self) -> str:
        return self.utf8.decode(b"", final=True)


# --- prefill vs decode, measured (the counts of bytes and FLOPs are in pipeline/roofline.py) --

def time_prefill(model, ids, repeats: int = 3) -> float:
    """Median wall time (s) of one parallel pass over `ids` into an empty KV cache."""
    times = []
    for _ in range(repeats):
        kv = model.new_kv_cache(capacity=len(ids))
        start = time.perf_counter()
        model.prefill(list(ids), kv)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def time_decode(model, ids, n_steps: int = 5) -> float:
    """Median wall time (s) of one decode step with `ids` already in the KV cache."""
    kv = model.new_kv_cache(capacity=len(ids) + n_steps)
    token = int(np.argmax(model.prefill(list(ids), kv)[-1]))
    times = []
    for _ in range(n_steps):
        start = time.perf_counter()
        token = int(np.argmax(model.decode(token, kv)))
        times.append(time.perf_counter() - start)
    return float(np.median(times))
