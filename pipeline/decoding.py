"""Greedy decoding and beam search on the running model, with the whole search tree recorded.

Greedy decoding takes the most probable token at every step. Beam search keeps the `width` most
probable partial continuations ("beams") instead of one: at each step every beam proposes its
best next tokens, all proposals are ranked by their total log-probability (the sum of the
log-probabilities of their tokens), and the best `width` survive; the rest are pruned.

A beam that proposes the end-of-text token is finished and set aside. The search stops after
`max_new_tokens` steps or when the context window is full (pipeline.generation.finish_reason,
the rules of every generation loop), or as soon as `width` beams have finished (Hugging Face's
`early_stopping=True`). Finished beams are ranked by Hugging Face's length-penalised score

    score = sum of log-probabilities / (number of new tokens) ** length_penalty

(length_penalty 1 = the average log-probability per token, 0 = the plain sum; beams of equal
length are ranked the same whatever the penalty). Each beam keeps its own KV cache; a step runs
all beams through the model together with `Model.decode_batch`.
"""
from dataclasses import dataclass, field

import numpy as np

from pipeline.generation import finish_reason
from pipeline.model import log_softmax
from pipeline.ranking import top_k


def length_penalised(total_logprob: float, n_tokens: int, length_penalty: float) -> float:
    """Hugging Face's beam score: total / n ** length_penalty."""
    return total_logprob / (max(n_tokens, 1) ** length_penalty)


@dataclass
class Node:
    """One proposal in the search tree: a beam plus one token."""
    id: int
    parent: int               # -1: a child of the prompt
    step: int                 # 0 for the first new token
    token: int
    logprob: float            # log p(token | prompt and the tokens before it)
    total: float              # sum of logprob along the path from the prompt
    status: str = "pruned"    # "kept" (a beam for the next step), "finished" (end-of-text
                              #   proposed in the top width), "pruned"


@dataclass
class Hypothesis:
    tokens: tuple             # the new tokens (the end-of-text token included if it ended there)
    total: float              # sum of their log-probabilities
    score: float              # length-penalised score, the ranking of the final beams
    node: int                 # the tree node of its last token
    ended: bool               # True: stopped at end-of-text; False: stopped at the length limit


@dataclass
class BeamSearch:
    width: int
    nodes: list = field(default_factory=list)       # every proposal, in order of creation
    final: list = field(default_factory=list)       # Hypothesis, best score first (<= width)
    steps: int = 0                                  # steps run

    def path(self, node_id: int) -> list:
        """Node ids from the first new token down to node_id."""
        out = []
        while node_id != -1:
            out.append(node_id)
            node_id = self.nodes[node_id].parent
        return out[::-1]


@dataclass
class _Beam:
    tokens: tuple
    total: float
    node: int
    kv: object
    logprobs: np.ndarray      # [V] the next token's log-probabilities


def beam_search(model, prompt_ids, width: int, max_new_tokens: int, length_penalty=1.0,
                allowed=None, stop_at_eos=True, start=None) -> BeamSearch:
    """Beam search from the prompt. `allowed` (token ids) restricts the tokens proposed, e.g.
    to make a brute-force check possible; log-probabilities are still the model's own over
    the whole vocabulary. start: the prompt already run, as for continue_batch."""
    if width < 1 or max_new_tokens < 1:
        raise ValueError("width and max_new_tokens must be >= 1")
    eos = model.config.eos_token_id if stop_at_eos else None
    kv, logits = start if start is not None else _prefill(model, prompt_ids)
    first = log_softmax(logits)
    allowed = None if allowed is None else np.asarray(sorted(set(allowed)), dtype=np.int64)
    search = BeamSearch(width)
    running = [_Beam((), 0.0, -1, kv, first)]
    finished = []
    for step in range(max_new_tokens):
        proposals = []                                   # (total, beam index, node id)
        for b, beam in enumerate(running):
            for token in _best_tokens(beam.logprobs, width + 1, allowed):
                lp = float(beam.logprobs[token])
                node = Node(len(search.nodes), beam.node, step, int(token), lp, beam.total + lp)
                search.nodes.append(node)
                proposals.append((node.total, b, node.id))
        proposals.sort(key=lambda p: (-p[0], p[2]))
        survivors = []
        for rank, (total, b, node_id) in enumerate(proposals):
            node = search.nodes[node_id]
            parent = running[b]
            if node.token == eos:
                if rank < width:
                    node.status = "finished"
                    finished.append(Hypothesis(parent.tokens + (node.token,), total,
                                               0.0, node_id, True))
                continue
            node.status = "kept"
            survivors.append((parent, node))
            if len(survivors) == width:
                break
        search.steps = step + 1
        if len(finished) >= width:          # early stopping: the unfinished beams are dropped
            running = []
            break
        # every beam is as long: the length rules (context, limit) end them all at once
        last = finish_reason(None, len(prompt_ids) + step + 1, step + 1, max_new_tokens,
                             model.config.n_ctx)
        if last or not survivors:
            running = [_Beam(p.tokens + (n.token,), n.total, n.id, None, None)
                       for p, n in survivors]
            break
        kvs = [p.kv.copy() for p, _ in survivors]
        logits = model.decode_batch([n.token for _, n in survivors], kvs)   # [B, V]
        running = [_Beam(p.tokens + (n.token,), n.total, n.id, kvs[i], log_softmax(logits[i]))
                   for i, (p, n) in enumerate(survivors)]
    finished += [Hypothesis(beam.tokens, beam.total, 0.0, beam.node, False) for beam in running]
    for h in finished:
        h.score = length_penalised(h.total, len(h.tokens), length_penalty)
    finished.sort(key=lambda h: (-h.score, h.node))
    search.final = finished[:width]
    return search


def _best_tokens(logprobs, n, allowed):  # -> the n most probable token ids (of `allowed`)
    ids = np.arange(len(logprobs)) if allowed is None else allowed
    values = logprobs[ids]
    return ids[top_k(values, n)]


def sequence_logprobs(model, prompt_ids, new_ids) -> list:
    """log p of each new token given everything before it, from one forward pass."""
    ids = list(prompt_ids) + list(new_ids)
    lp = log_softmax(model.forward(ids))                  # [T, V]
    start = len(prompt_ids)
    return [float(lp[start - 1 + i, t]) for i, t in enumerate(new_ids)]


@dataclass
class Continuation:
    tokens: list              # the new token ids (end-of-text included if it stopped there)
    logprobs: list            # the model's log p of each (its own distribution, before any
                              #   sampling controls)

    @property
    def total(self) -> float:
        return float(sum(self.logprobs))


def _prefill(model, prompt_ids) -> tuple:  # -> (KV cache, the next token's logits [V])
    kv = model.new_kv_cache()
    return kv, model.prefill(list(prompt_ids), kv)[-1]


def continue_batch(model, prompt_ids, pickers, max_new_tokens, stop_at_eos=True,
                   start=None) -> list:
    """Several continuations of one prompt side by side, e.g. greedy and a few seeded samples:
    the prompt is run once, each continuation gets a copy of its KV cache, and every step runs
    all unfinished ones through `Model.decode_batch`. `pickers` are `sample(logits, tokens_so_far)
    -> int` functions (pipeline.sampling.greedy, pipeline.sampling.sampler(...)), as for
    `decode_loop`, which gives the same tokens one sequence at a time.
    start: (KV cache, logits [V]) of the prompt already run (Model.kv_from_recording): the
    prompt is not run again (the cache is used, not copied)."""
    kv, logits = start if start is not None else _prefill(model, prompt_ids)
    eos = model.config.eos_token_id if stop_at_eos else None
    out = [Continuation([], []) for _ in pickers]
    history = [list(prompt_ids) for _ in pickers]
    kvs = [kv.copy() for _ in pickers]
    step_logits = [logits] * len(pickers)
    live = list(range(len(pickers)))
    for step in range(max_new_tokens):
        for i in live:
            token = int(pickers[i](step_logits[i], history[i]))
            out[i].tokens.append(token)
            out[i].logprobs.append(float(log_softmax(step_logits[i])[token]))
            history[i].append(token)
        live = [i for i in live if finish_reason(out[i].tokens[-1], len(history[i]), step + 1,
                                                 max_new_tokens, model.config.n_ctx, eos) is None]
        if not live:
            break
        batch = model.decode_batch([out[i].tokens[-1] for i in live], [kvs[i] for i in live])
        for row, i in enumerate(live):
            step_logits[i] = batch[row]
    return out
