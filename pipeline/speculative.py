"""Speculative decoding (Leviathan, Kalman & Matias 2023; Chen et al. 2023): a small draft model
guesses gamma tokens, the big target model checks all of them in one forward pass.

One round, with x the text so far:

    1. the draft proposes d_1 .. d_gamma, one decode step each, drawing d_i from its own
       distribution q_i (q_i(d_i) is its probability)
    2. the target reads x[-1], d_1 .. d_gamma in ONE pass (its KV cache already holds the rest
       of x) and so gives its distribution p_i at every proposed position, plus p_{gamma+1}
    3. d_i is accepted with probability min(1, p_i(d_i) / q_i(d_i)), in order; at the first
       rejection the target draws a replacement from the residual max(0, p_i - q_i),
       normalised, and the round ends; the cache entries of the rejected tokens are dropped
       (`KVCache.truncate`)
    4. when all gamma are accepted, the target's p_{gamma+1} gives one bonus token for free

Every round therefore yields between 1 and gamma + 1 tokens for one target pass, and the tokens
have exactly the target's distribution: a token the draft over-proposes (q > p) is sometimes
rejected, and the residual adds back exactly the mass of tokens it under-proposes (q < p).
Greedy decoding is the case temperature 0: p and q put all their mass on their top token, so a
proposal is accepted exactly when the draft's top token is the target's, and a rejection is
replaced by the target's top token: the output is the target's own greedy text.

The draft need not be a model. Prompt lookup decoding (Saxena 2023; `prompt_lookup_num_tokens`
in Hugging Face transformers) finds the last n tokens (n = 3, then 2, then 1) earlier in the
prompt and the text generated so far and proposes the tokens that followed them there
(`ngram_lookup`, served by `NgramDraft`). Its q is a point mass, q(d) = 1, so the same rule
accepts d with probability p(d) and on a rejection draws from p with d removed; at temperature 0
a proposal is accepted exactly when it is the target's top token. It costs no model pass (c ~ 0),
and it finds something only where the text repeats itself: code, names, quoted passages.

Expected gain: with per-token acceptance rate a, gamma proposals and a draft step costing c
target steps, a round yields (1 - a^(gamma+1)) / (1 - a) tokens on average and costs
gamma c + 1 target steps, so the expected speed-up is
    (1 - a^(gamma+1)) / ((1 - a) (gamma c + 1))        (Leviathan et al. 2023, theorem 3.8)
"""
import os
import time
from dataclasses import dataclass, field

import numpy as np

from pipeline.generation import decode_loop, finish_reason
from pipeline.loader import ModelLoadError, load_model
from pipeline.model import Model
from pipeline.sampling import draw, softmax_with_temperature


class DraftMismatch(ValueError):
    """A draft model that cannot serve a target: another tokenizer or vocabulary."""


def check_draft(target: Model, draft: Model):
    """Raise DraftMismatch unless the two models read and write the same token ids."""
    if target.config.vocab_size != draft.config.vocab_size:
        raise DraftMismatch(f"the draft's vocabulary has {draft.config.vocab_size:,} tokens, "
                            f"the target's {target.config.vocab_size:,}")
    t, d = target.tokenizer, draft.tokenizer
    if t is None or d is None:
        raise DraftMismatch("both models need a tokenizer")
    same = (t.n_vocab == d.n_vocab and t.special_tokens_set == d.special_tokens_set
            and t.token_byte_values() == d.token_byte_values()
            and all(t.encode_single_token(b) == d.encode_single_token(b)
                    for b in t.token_byte_values()))
    if not same:
        raise DraftMismatch("the draft's tokenizer differs from the target's: the same text "
                            "would become different token ids")


def load_draft(target: Model, draft: Model = None, path: str = None):
    """(the draft model for `target`, or None; why there is none, or ""): `draft` when given
    (already loaded), else the model in directory `path`, else the sibling directory
    `<target dir>-draft` when it exists (models/austen-draft for models/austen). A draft that
    does not load, or reads another tokenizer (check_draft), is refused with the reason."""
    if draft is None and not path:
        sibling = os.path.normpath(target.path or "") + "-draft"
        if not target.path or not os.path.isdir(sibling):
            return None, (f"no draft model: give one with --draft-model (looked for {sibling})"
                          if target.path else "no draft model given")
        path = sibling
    if draft is None:
        try:
            draft = load_model(path)
        except ModelLoadError as e:
            return None, f"the draft model did not load: {e}"
    try:
        check_draft(target, draft)
    except DraftMismatch as e:
        return None, f"the draft model cannot serve this model: {e}"
    return draft, ""


def residual(p, q):  # [V], [V] -> [V]: the normalised max(0, p - q)
    r = np.maximum(np.asarray(p, dtype=np.float64) - np.asarray(q, dtype=np.float64), 0.0)
    total = r.sum()
    return r / total if total > 0 else np.asarray(p, dtype=np.float64)


def accept_or_resample(token: int, p, q, rng: np.random.Generator):
    """The verification rule for one proposal: (accepted, u, replacement or None).

    u < p(token) / q(token) accepts (probability min(1, p / q)); otherwise a replacement is
    drawn from the residual. Together they yield a token distributed exactly as p."""
    u = float(rng.random())
    if u * q[token] < p[token]:               # u < p / q without dividing by a zero q
        return True, u, None
    return False, u, draw(residual(p, q), rng)


@dataclass(frozen=True)
class Proposal:
    token: int          # what the draft proposed
    q: float            # the draft's probability of it
    p: float            # the target's probability of it
    u: float            # the uniform number compared with p / q
    accepted: bool


@dataclass(frozen=True)
class Round:
    proposals: tuple    # Proposal, in order; after the first rejection there are no more
    token: int          # the target's own token that ends the round
    kind: str           # "resampled" (after a rejection) or "bonus" (all accepted)
    p: float            # its probability under the target's distribution p at that position
    draft_seconds: float    # the draft's proposals (its forward passes and draws)
    target_seconds: float   # the target's one verification pass
    lookup: "Lookup" = None  # what prompt lookup found (an NgramDraft), else None
    n_fed: int = 0          # tokens the verification pass read (the proposals + 1)

    @property
    def n_accepted(self) -> int:
        return sum(pr.accepted for pr in self.proposals)

    @property
    def tokens(self) -> list:  # what the round adds to the text
        return [pr.token for pr in self.proposals if pr.accepted] + [self.token]


@dataclass
class SpeculativeRun:
    prompt: list
    gamma: int
    tokens: list = field(default_factory=list)   # the new tokens
    rounds: list = field(default_factory=list)   # Round, one per target verification pass
    seconds: float = 0.0                         # wall time of the whole generation
    prefill_seconds: float = 0.0                 # both models reading the prompt
    draft_steps: int = 0                         # draft forward passes (0: prompt lookup)
    finish: str = None                           # "eos", "context" or "limit" (finish_reason)
    # where each round began, and where the last one ended (len(rounds) + 1 of them), with the
    # caches as the run left them: what a run with other settings continues from (`resume`)
    checkpoints: list = field(default_factory=list, repr=False, compare=False)
    kept: tuple = field(default=None, repr=False, compare=False)  # (target cache, draft's)

    @property
    def proposed(self) -> int:
        return sum(len(r.proposals) for r in self.rounds)

    @property
    def accepted(self) -> int:
        return sum(r.n_accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float:  # a: accepted proposals / proposals
        return self.accepted / self.proposed if self.proposed else float("nan")

    @property
    def tokens_per_pass(self) -> float:  # new tokens / target verification passes
        return len(self.tokens) / len(self.rounds) if self.rounds else float("nan")


@dataclass(frozen=True)
class Checkpoint:
    """The state of a run where a round began (or where the last one ended): a run asked for
    with other settings that makes the same rounds up to here continues from it."""
    n_new: int          # new tokens before it
    g: int              # proposals the round asked for (-1: after the last round)
    t_kv: int           # tokens in the target's cache
    d_kv: int           # tokens in the draft model's cache (0: prompt lookup)
    rng: dict           # the random generator's state (bit_generator.state)
    draft_steps: int
    seconds: float      # since the run began


def expected_tokens_per_pass(a: float, gamma: int) -> float:
    """E[tokens per round] = 1 + a + ... + a^gamma = (1 - a^(gamma+1)) / (1 - a)."""
    return float(gamma + 1) if a == 1 else (1 - a ** (gamma + 1)) / (1 - a)


def expected_speedup(a: float, gamma: int, c: float) -> float:
    """(1 - a^(gamma+1)) / ((1 - a) (gamma c + 1)): Leviathan et al. 2023, theorem 3.8."""
    return expected_tokens_per_pass(a, gamma) / (gamma * c + 1)


def distribution_at(temperature: float):
    """probs(logits [V]) -> [V]: what both models draw from (temperature 0: greedy)."""
    def probs(logits):
        return softmax_with_temperature(logits, temperature)
    return probs


# --- the drafts: a model, or a lookup in the text so far -----------------------------------------

@dataclass(frozen=True)
class Lookup:
    """What prompt lookup found for one round."""
    n: int              # length of the n-gram matched (0: nothing found)
    at: int             # where its earlier occurrence starts in the sequence (-1: none)
    tokens: tuple       # the proposal: the tokens that followed it, at most gamma


def ngram_lookup(tokens, gamma: int, max_n: int = 3, min_n: int = 1) -> Lookup:
    """Prompt lookup decoding's proposal (Saxena 2023): the last n tokens of `tokens`, for
    n = max_n down to min_n, looked up earlier in `tokens`; the latest earlier occurrence with at
    least one token after it gives those tokens, at most gamma of them. (Hugging Face's
    implementation takes the earliest occurrence instead.) Nothing found: Lookup(0, -1, ())."""
    tokens = [int(t) for t in tokens]
    size = len(tokens)
    if gamma < 1:
        return Lookup(0, -1, ())
    for n in range(max_n, min_n - 1, -1):
        if size < n + 1:
            continue
        pattern = tokens[size - n:]
        for start in range(size - n - 1, -1, -1):          # the latest first
            if tokens[start:start + n] == pattern:
                follow = start + n
                return Lookup(n, start, tuple(tokens[follow:follow + gamma]))
    return Lookup(0, -1, ())


@dataclass(frozen=True)
class NgramDraft:
    """The draft of prompt lookup decoding: no model, a lookup in the sequence so far
    (ngram_lookup); each proposal's q is a point mass on it."""
    max_n: int = 3
    min_n: int = 1


def point_mass(token: int, size: int):  # [V]: probability 1 on token
    q = np.zeros(size, dtype=np.float32)
    q[token] = 1.0
    return q


class _ModelDrafter:
    """A draft model with its own KV cache: proposes by drawing from its distributions."""

    def __init__(self, model: Model):
        self.model, self.kv = model, model.new_kv_cache()

    def prefill(self, x):
        if len(x) > 1:
            self.model.prefill(x[:-1], self.kv)

    def room(self, n_x: int) -> int:      # proposals that still fit its context window
        return self.model.config.n_ctx - n_x + 1

    def propose(self, x, g, probs, rng, size):
        """(proposals, their q distributions, draft forward passes, None)."""
        drafts, qs, steps = [], [], 0
        if g:      # catching up first on tokens it has not read
            logits = self.model.prefill(x[len(self.kv):], self.kv)[-1]
            for i in range(g):
                q = probs(logits)
                drafts.append(draw(q, rng))
                qs.append(q)
                if i < g - 1:
                    logits = self.model.decode(drafts[-1], self.kv)
                    steps += 1
            steps += 1
        return drafts, qs, steps, None

    def keep(self, n: int):
        self.kv.truncate(n)

    def cache(self):
        return self.kv

    def restore(self, kv, n: int):     # continue from a kept cache's first n tokens
        self.kv = kv.copy()
        self.kv.truncate(n)

    def same_round(self, text, g: int, before: int, rnd) -> bool:
        """Whether asking for g proposals after `text` makes round `rnd` again, which asked
        for `before`: the draft draws one token per proposal, so only the same number does."""
        return g == before


class _NgramDrafter:
    """Prompt lookup: proposes what followed the last n-gram earlier, each with q = 1."""

    def __init__(self, draft: NgramDraft):
        self.draft = draft

    def prefill(self, x):
        pass

    def room(self, n_x: int) -> int:
        return 1 << 30      # no window of its own: the target's is the limit

    def propose(self, x, g, probs, rng, size):
        found = ngram_lookup(x, g, self.draft.max_n, self.draft.min_n) if g else \
            Lookup(0, -1, ())
        drafts = list(found.tokens)
        return drafts, [point_mass(d, size) for d in drafts], 0, found

    def keep(self, n: int):
        pass

    def cache(self):
        return None

    def restore(self, kv, n: int):
        pass

    def same_round(self, text, g: int, before: int, rnd) -> bool:
        """Lookup draws nothing: g proposals make the round again when the lookup finds the
        same tokens (it found fewer than both numbers, or the same number was asked)."""
        if g == before:
            return True
        found = ngram_lookup(text, g, self.draft.max_n, self.draft.min_n) if g else \
            Lookup(0, -1, ())
        return found == rnd.lookup       # every token proposed (not only those checked)


def drafter_for(draft):
    return _NgramDrafter(draft) if isinstance(draft, NgramDraft) else _ModelDrafter(draft)


class _Verification:
    """One round's rows of the target: its logits after x and after each proposal, from one
    pass over the unread tail of x and the proposals; with known_rows, from there while every
    row read is known (then no pass runs: seconds and n_fed stay 0)."""

    def __init__(self, target: Model, kv, x: list, drafts: list, known_rows=None):
        self.target, self.kv, self.x, self.drafts = target, kv, x, drafts
        self.known, self.rows, self.seconds, self.n_fed = known_rows, None, 0.0, 0
        if known_rows is None:
            self.verify()

    def verify(self):
        fed = self.x[len(self.kv):]
        began = time.perf_counter()
        self.rows = self.target.prefill(fed + self.drafts, self.kv)[len(fed) - 1:]  # [g + 1, V]
        self.seconds = time.perf_counter() - began
        self.n_fed = len(fed) + len(self.drafts)

    def row(self, i: int):            # the target's logits after x and the first i proposals
        if self.rows is None:
            found = self.known.get(tuple(self.x) + tuple(self.drafts[:i]))
            if found is not None:
                return found
            self.verify()
        return self.rows[i]


def speculative_generate(target: Model, draft, prompt, max_new_tokens: int, gamma: int,
                         temperature: float = 1.0, rng: np.random.Generator = None,
                         stop_at_eos: bool = True, prompt_kv=None,
                         known_rows=None, resume: SpeculativeRun = None) -> SpeculativeRun:
    """Generate up to max_new_tokens with the draft proposing and the target verifying.

    `draft` is a Model with the target's tokenizer (check_draft) or an NgramDraft (prompt
    lookup); both go through the same verification (accept_or_resample).

    Stops like `decode_loop`, by pipeline.generation.finish_reason: after max_new_tokens,
    after the end-of-sequence token, or when the context window is full. A round proposes at
    most as many tokens as are still wanted minus one (its own token ends it), so nothing is
    generated and thrown away.

    prompt_kv: a KV cache of the target holding the whole prompt (Model.kv_from_recording), used
    instead of running the prompt again (its prefill time is then not measured).

    known_rows: the target's logits already computed, text -> logits [V] after it (a mapping
    with .get; text a tuple of token ids, the prompt included), e.g. each step of the target's
    own greedy run. The rule reads each row it needs from there while it can; a round whose
    rows are all there runs no verification pass (its target_seconds and n_fed are 0), and at
    the first row missing the round runs its pass as without them: over the tail of the text
    the target has not read and all the proposals. In greedy mode every row the rule reads is
    on the target's own greedy path (a rejection ends the round), so that run's rows answer
    every round: the same decisions and tokens as the passes give (each row computed by a
    one-token step rather than within a pass over several tokens: equal to float rounding).

    resume: a run of the same target, draft, prompt, temperature, stop rule and known_rows
    with the same seed (its rng started in the state `rng` is in), for another length or γ:
    the rounds this run makes too (same_rounds: those that ask for the same proposals) are
    taken from it, and the run goes on from where the last of them ended, with its caches
    (copied) and its generator's state: the same tokens, probabilities and decisions as
    running again from the prompt (each pass reads the same cache entries). The times of the
    rounds taken are `resume`'s.
    """
    if gamma < 1:
        raise ValueError(f"gamma must be at least 1, not {gamma}")
    rng = rng if rng is not None else np.random.default_rng()
    probs = distribution_at(temperature)
    x = [int(t) for t in prompt]
    run = SpeculativeRun(list(x), gamma)
    start = time.perf_counter()
    drafter = drafter_for(draft)
    t_ctx, size = target.config.n_ctx, target.config.vocab_size
    eos = target.config.eos_token_id if stop_at_eos else None
    finish = None
    taken = same_rounds(resume, x, max_new_tokens, gamma, t_ctx, drafter) \
        if resume is not None else -1
    if taken >= 0:                       # continue where the last round taken ended
        cp = resume.checkpoints[taken]
        t_kv = resume.kept[0].copy()
        t_kv.truncate(cp.t_kv)
        drafter.restore(resume.kept[1], cp.d_kv)
        rng.bit_generator.state = cp.rng
        run.tokens = list(resume.tokens[:cp.n_new])
        run.rounds = list(resume.rounds[:taken])
        run.draft_steps, run.prefill_seconds = cp.draft_steps, resume.prefill_seconds
        x += run.tokens
        start -= cp.seconds
        if run.tokens:                   # as the loop below decides after a round's tokens
            finish = finish_reason(run.tokens[-1], len(x), len(run.tokens), max_new_tokens,
                                   t_ctx, eos)
    elif prompt_kv is not None:          # each cache holds all of x but its last token
        t_kv = prompt_kv
        t_kv.truncate(len(x) - 1)
    else:
        t_kv = target.new_kv_cache()
        if len(x) > 1:
            target.prefill(x[:-1], t_kv)
    if taken < 0:
        drafter.prefill(x)
        run.prefill_seconds = time.perf_counter() - start

    def checkpoint(g):
        d_kv = drafter.cache()
        run.checkpoints.append(Checkpoint(len(run.tokens), g, len(t_kv),
                                          0 if d_kv is None else len(d_kv),
                                          rng.bit_generator.state, run.draft_steps,
                                          time.perf_counter() - start))

    run.checkpoints = list(resume.checkpoints[:taken]) if taken >= 0 else []
    while finish is None and len(run.tokens) < max_new_tokens and len(x) <= t_ctx:
        remaining = max_new_tokens - len(run.tokens)
        g = max(0, min(gamma, remaining - 1, t_ctx - len(x), drafter.room(len(x))))
        checkpoint(g)
        # 1. the draft proposes up to g tokens, each with its distribution q
        t0 = time.perf_counter()
        drafts, qs, steps, found = drafter.propose(x, g, probs, rng, size)
        run.draft_steps += steps
        t1 = time.perf_counter()
        # 2. the target reads the unread tail of x and all proposals in one pass (or, with
        #    known_rows, when a row the rule reads is not known)
        check = _Verification(target, t_kv, x, drafts, known_rows)
        # 3. accept in order until the first rejection
        proposals, extra = [], None
        for i, (d, q) in enumerate(zip(drafts, qs, strict=True)):
            p = probs(check.row(i))
            accepted, u, extra = accept_or_resample(d, p, q, rng)
            proposals.append(Proposal(d, float(q[d]), float(p[d]), u, accepted))
            if not accepted:
                kind, p_extra = "resampled", float(p[extra])
                break
        else:
            # 4. all accepted: the target's distribution after the last one gives a bonus token
            p = probs(check.row(len(drafts)))
            extra = draw(p, rng)
            kind, p_extra = "bonus", float(p[extra])
        accepted = [pr.token for pr in proposals if pr.accepted]
        # the caches keep x and the accepted proposals only
        t_kv.truncate(len(x) + len(accepted))
        drafter.keep(len(x) + len(accepted))
        rnd = Round(tuple(proposals), int(extra), kind, p_extra, t1 - t0, check.seconds, found,
                    check.n_fed)
        run.rounds.append(rnd)
        for token in rnd.tokens:
            x.append(token)
            run.tokens.append(token)
            finish = finish_reason(token, len(x), len(run.tokens), max_new_tokens, t_ctx, eos)
            if finish:
                break
    checkpoint(-1)
    run.kept = (t_kv, drafter.cache())
    run.finish = finish
    run.seconds = time.perf_counter() - start
    return run


def rounds_in_common(prev: SpeculativeRun, target: Model, draft, max_new_tokens: int,
                     gamma: int) -> int:
    """same_rounds for a run of `target` and `draft` on prev's prompt."""
    return same_rounds(prev, prev.prompt, max_new_tokens, gamma, target.config.n_ctx,
                       drafter_for(draft))


def same_rounds(prev: SpeculativeRun, prompt: list, max_new_tokens: int, gamma: int,
                t_ctx: int, drafter) -> int:
    """How many of prev's first rounds a run of these settings makes too (see
    speculative_generate's resume): each asks for the proposals prev's asked for (the drafter
    decides: the same number, or for prompt lookup the same tokens found) and fits the new
    length; after the last of prev's rounds, 0 to len(prev.rounds)."""
    if list(prev.prompt) != list(prompt) or not prev.checkpoints or prev.kept is None:
        return -1
    text = list(prev.prompt) + list(prev.tokens)
    n = 0
    for rnd, cp in zip(prev.rounds, prev.checkpoints, strict=False):
        n_x = len(prompt) + cp.n_new
        remaining = max_new_tokens - cp.n_new
        if remaining <= 0:
            break
        g = max(0, min(gamma, remaining - 1, t_ctx - n_x, drafter.room(n_x)))
        if not drafter.same_round(text[:n_x], g, cp.g, rnd):
            break
        n += 1
    return n


@dataclass(frozen=True)
class TimedGeneration:
    tokens: list
    seconds: float           # wall time of the whole generation (prefill included)
    step_seconds: list       # each decode step (the prefill excluded)

    @property
    def seconds_per_step(self) -> float:
        return sum(self.step_seconds) / len(self.step_seconds) if self.step_seconds \
            else float("nan")


def timed_generate(model: Model, prompt, max_new_tokens: int, temperature: float = 1.0,
                   rng: np.random.Generator = None, stop_at_eos: bool = True) -> TimedGeneration:
    """A model alone, token by token with `decode_loop`, each step timed: the baseline."""
    rng = rng if rng is not None else np.random.default_rng()
    probs = distribution_at(temperature)
    stamps = []

    def sample(logits, history):
        stamps.append(time.perf_counter())
        return draw(probs(logits), rng)

    start = time.perf_counter()
    tokens = [p.token for p in decode_loop(model, prompt, max_new_tokens, sample,
                                           stop_at_eos=stop_at_eos)]
    seconds = time.perf_counter() - start
    return TimedGeneration(tokens, seconds, list(np.diff(stamps)))
