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
import threading
from dataclasses import dataclass, field, replace

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
    # every hypothesis that ended (finished, or still running at the last step), in the order
    # they ended: `final` is the best `width` of them by the length-penalised score (rescored)
    ended: list = field(default_factory=list, repr=False, compare=False)
    # where a longer search goes on from (beam_search's resume): the last step's survivors
    # with their parents' caches and the hypotheses finished before it; None when it cannot
    kept: tuple = field(default=None, repr=False, compare=False)

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
                allowed=None, stop_at_eos=True, start=None, resume=None) -> BeamSearch:
    """Beam search from the prompt. `allowed` (token ids) restricts the tokens proposed, e.g.
    to make a brute-force check possible; log-probabilities are still the model's own over
    the whole vocabulary. start: the prompt already run, as for continue_batch.

    resume: a search of the same model, prompt, width, `allowed` and stop rule that stopped at
    its length limit, shorter than max_new_tokens: this search takes its steps (every step
    before the last does not depend on the limit) and goes on from its last step's survivors
    and their caches: the same tree and beams as searching from the prompt. The length
    penalty only ranks the ended hypotheses (rescored)."""
    if width < 1 or max_new_tokens < 1:
        raise ValueError("width and max_new_tokens must be >= 1")
    eos = model.config.eos_token_id if stop_at_eos else None
    allowed = None if allowed is None else np.asarray(sorted(set(allowed)), dtype=np.int64)
    search = BeamSearch(width)
    if resume is not None and resume.kept is not None and resume.width == width \
            and resume.steps < max_new_tokens:
        last_step, survivors, finished = resume.kept
        search.nodes = [replace(node) for node in resume.nodes]
        finished = [replace(h) for h in finished]
        running = _advance(model, survivors)
        first_step = last_step + 1
    else:
        kv, logits = start if start is not None else _prefill(model, prompt_ids)
        running = [_Beam((), 0.0, -1, kv, log_softmax(logits))]
        finished, first_step = [], 0
    for step in range(first_step, max_new_tokens):
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
            if last == "limit" and survivors:       # a longer search goes on from here
                search.kept = (step, survivors, [replace(h) for h in finished])
            running = [_Beam(p.tokens + (n.token,), n.total, n.id, None, None)
                       for p, n in survivors]
            break
        running = _advance(model, survivors)
    finished += [Hypothesis(beam.tokens, beam.total, 0.0, beam.node, False) for beam in running]
    search.ended = finished
    search.final = rescored(search, length_penalty).final
    return search


def _advance(model, survivors) -> list:
    """The step's survivors (parent beam, node) as beams: each reads its token in a copy of its
    parent's cache, all in one batch."""
    kvs = [p.kv.copy() for p, _ in survivors]
    logits = model.decode_batch([n.token for _, n in survivors], kvs)   # [B, V]
    return [_Beam(p.tokens + (n.token,), n.total, n.id, kvs[i], log_softmax(logits[i]))
            for i, (p, n) in enumerate(survivors)]


def rescored(search: BeamSearch, length_penalty: float) -> BeamSearch:
    """The same search ranked with another length penalty: the tree and the ended hypotheses do
    not depend on it (proposals are pruned by their total log-probability), only the order of
    the ended ones, and so which `width` of them are final."""
    ended = [replace(h, score=length_penalised(h.total, len(h.tokens), length_penalty))
             for h in search.ended]
    ended.sort(key=lambda h: (-h.score, h.node))
    return replace(search, final=ended[:search.width])


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
    prompt is not run again (each continuation reads a copy of the cache). The run is an
    Extendable's first max_new_tokens."""
    return Extendable(model, prompt_ids, pickers, stop_at_eos, start).first(max_new_tokens)


class Extendable:
    """continue_batch's continuations, kept so that they can be made longer: first(n) is
    continue_batch(model, prompt_ids, pickers, n, start=start), and asking for more tokens
    later runs only the steps not run yet, from the kept KV caches and the logits of the last
    step (the pickers keep their own state: a sampler's generator goes on where it stopped).
    Fewer tokens are the first ones: a step does not depend on how many follow. Each step runs
    the sequences still going in one batch; the step that reads a step's tokens runs only when
    more are asked for.
    Thread-safe: one request at a time makes it longer."""

    def __init__(self, model, prompt_ids, pickers, stop_at_eos=True, start=None):
        kv, logits = start if start is not None else _prefill(model, prompt_ids)
        self.model, self.pickers = model, list(pickers)
        self.eos = model.config.eos_token_id if stop_at_eos else None
        self.out = [Continuation([], []) for _ in self.pickers]
        self.history = [list(prompt_ids) for _ in self.pickers]
        self.kvs = [kv.copy() for _ in self.pickers]
        self.step_logits = [logits] * len(self.pickers)
        self.live = list(range(len(self.pickers)))
        self.steps, self.unread = 0, False     # unread: the last step's tokens not read yet
        self.lock = threading.Lock()

    def ready(self, n: int) -> bool:
        """Whether first(n) runs no step: each continuation has n tokens or has ended."""
        return self.steps >= n or not self.live

    def first(self, n: int) -> list:
        """The first n tokens of each continuation (fewer where one ended): Continuations."""
        with self.lock:
            while self.steps < n and self.live:
                self._step()
            return [Continuation(o.tokens[:n], o.logprobs[:n]) for o in self.out]

    def _step(self):
        model, live = self.model, self.live
        if self.unread:
            batch = model.decode_batch([self.out[i].tokens[-1] for i in live],
                                       [self.kvs[i] for i in live])
            for row, i in enumerate(live):
                self.step_logits[i] = batch[row]
        for i in live:
            token = int(self.pickers[i](self.step_logits[i], self.history[i]))
            self.out[i].tokens.append(token)
            self.out[i].logprobs.append(float(log_softmax(self.step_logits[i])[token]))
            self.history[i].append(token)
        self.steps += 1
        # as continue_batch's rule, without the length limit: that is the caller's n
        self.live = [i for i in live if finish_reason(self.out[i].tokens[-1],
                                                      len(self.history[i]), self.steps,
                                                      self.steps + 1, model.config.n_ctx,
                                                      self.eos) is None]
        self.unread = True
