"""Speculative decoding: the accept / resample rule yields exactly the target's distribution
(many seeded draws, chi-square tests that also reject the draft's distribution), greedy
speculative decoding is the target's own greedy text token for token, the bookkeeping of
rounds, and the expected speed-up formula."""
import math
import os

import numpy as np
import pytest
import tiktoken

from pipeline import load_model, speculative
from pipeline.generation import decode_loop
from pipeline.model import Model, softmax
from pipeline.sampling import draw
from pipeline.statistics import goodness_of_fit
from web_support import has_default_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "models")


def chi_square_rejects(counts, probs) -> bool:
    """Pearson's chi-square test of the draws against probs (the sampler's own test, cells
    expected fewer than 5 times pooled) rejects at the 0.1% level."""
    return goodness_of_fit(counts, probs).p_value < 1e-3


# --- the rule on hand-built distributions -----------------------------------------------------

P = np.array([0.40, 0.25, 0.20, 0.10, 0.05, 0.0])     # the target's
Q = np.array([0.10, 0.40, 0.05, 0.15, 0.10, 0.20])    # the draft's: wrong everywhere


def speculative_draws(p, q, n, seed):
    rng = np.random.default_rng(seed)
    tokens, accepted = [], 0
    for _ in range(n):
        proposal = draw(q, rng)
        ok, _, replacement = speculative.accept_or_resample(proposal, p, q, rng)
        accepted += ok
        tokens.append(proposal if ok else replacement)
    return np.bincount(tokens, minlength=len(p)), accepted


def test_accept_or_resample_gives_the_target_distribution():
    n = 20_000
    counts, accepted = speculative_draws(P, Q, n, seed=0)
    assert not chi_square_rejects(counts, P)
    assert chi_square_rejects(counts, Q)              # the test can tell the two apart
    assert counts[5] == 0                              # p = 0: never kept, never resampled
    # a proposal is accepted with probability sum_x min(p(x), q(x)) = 0.55
    rate = sum(np.minimum(P, Q))
    assert abs(accepted / n - rate) < 4 * math.sqrt(rate * (1 - rate) / n)


def test_the_draft_alone_is_not_the_target():
    rng = np.random.default_rng(0)
    counts = np.bincount([draw(Q, rng) for _ in range(20_000)], minlength=len(Q))
    assert chi_square_rejects(counts, P) and not chi_square_rejects(counts, Q)


def test_residual():
    r = speculative.residual(P, Q)
    np.testing.assert_allclose(r, np.array([0.30, 0, 0.15, 0, 0, 0]) / 0.45)
    assert speculative.residual(P, P).tolist() == P.tolist()     # never used: p == q never rejects


def test_identical_models_accept_everything():
    for token in range(5):
        assert speculative.accept_or_resample(token, P, P, np.random.default_rng(token))[0]


# --- the whole algorithm on two small models --------------------------------------------------

@pytest.fixture(scope="module")
def pair():
    """A target (4 heads, 2 layers) and a different draft (multi-query): random weights, one
    tokenizer, 320 tokens."""
    return (load_model(os.path.join(FIXTURES, "llama_mha")),
            load_model(os.path.join(FIXTURES, "llama_mqa")))


def test_first_two_tokens_follow_the_target(pair):
    target, draft = pair
    prompt, t = [5, 77, 140], 0.5
    p1 = softmax(target.forward(prompt)[-1] / t)
    # brute force: P(second = y) = sum_x p(x) p(y | x), one forward pass per first token x
    p2 = sum(p1[x] * softmax(target.forward(prompt + [x])[-1] / t) for x in range(320))
    q1 = softmax(draft.forward(prompt)[-1] / t)
    rng = np.random.default_rng(7)
    firsts, seconds, runs = [], [], []
    for _ in range(2000):
        run = speculative.speculative_generate(target, draft, prompt, 3, gamma=2, temperature=t,
                                               rng=rng, stop_at_eos=False)
        firsts.append(run.tokens[0])
        seconds.append(run.tokens[1])
        runs.append(run)
    c1, c2 = np.bincount(firsts, minlength=320), np.bincount(seconds, minlength=320)
    assert not chi_square_rejects(c1, p1)
    assert not chi_square_rejects(c2, p2)
    assert chi_square_rejects(c1, q1)                 # the draft's own choice would fail
    rate = sum(r.accepted for r in runs) / sum(r.proposed for r in runs)
    assert 0.05 < rate < 0.95                         # both outcomes were exercised


def test_rounds_add_up(pair):
    target, draft = pair
    run = speculative.speculative_generate(target, draft, [3, 1, 4, 1, 5], 30, gamma=4,
                                           temperature=1.0, rng=np.random.default_rng(1),
                                           stop_at_eos=False)
    assert len(run.tokens) == 30
    assert sum((r.tokens for r in run.rounds), []) == run.tokens
    for r in run.rounds:
        assert 0 <= len(r.proposals) <= 4
        assert all(p.accepted for p in r.proposals[:-1])          # stops at the first reject
        assert (r.kind == "bonus") == all(p.accepted for p in r.proposals)
        for pr in r.proposals:
            assert 0 <= pr.u < 1 and 0 < pr.q <= 1 and 0 <= pr.p <= 1
            assert pr.accepted == (pr.u < pr.p / pr.q)
    assert run.tokens_per_pass == 30 / len(run.rounds)
    assert run.acceptance_rate == run.accepted / run.proposed


def test_same_seed_same_tokens(pair):
    target, draft = pair
    runs = [speculative.speculative_generate(target, draft, [9, 8, 7], 20, gamma=3,
                                             rng=np.random.default_rng(42)) for _ in range(2)]
    assert runs[0].tokens == runs[1].tokens


# --- greedy: the target's own text ------------------------------------------------------------

@pytest.fixture(scope="module")
def austen_pair():
    if not has_default_model():
        pytest.skip("models/austen/model.safetensors is missing")
    return load_model(None), load_model(os.path.join(ROOT, "models", "austen-draft"))


@pytest.mark.parametrize("prompt,gamma", [
    ("It is a truth universally acknowledged, that a single man", 1),
    ("It is a truth universally acknowledged, that a single man", 4),
    ("Mr. Darcy", 3),
    ("“I cannot", 8),
    ("E", 2),                                              # a one-token prompt
])
def test_greedy_speculative_is_the_targets_greedy_text(austen_pair, prompt, gamma):
    target, draft = austen_pair
    ids = target.tokenizer.encode_ordinary(prompt)
    expected = [p.token for p in decode_loop(target, ids, 40)]
    run = speculative.speculative_generate(target, draft, ids, 40, gamma, temperature=0.0,
                                           rng=np.random.default_rng(0))
    assert run.tokens == expected
    assert len(run.rounds) < 40                        # the draft did save passes


@pytest.mark.parametrize("prompt", ["It is a truth universally acknowledged, that a single",
                                    "E"])
def test_starting_from_the_prompts_recorded_cache_changes_nothing(austen_pair, prompt):
    """The page starts a run from the prompt's shared recording (Model.kv_from_recording)
    instead of a prefill: the same rounds, draws and tokens."""
    target, draft = austen_pair
    ids = target.tokenizer.encode_ordinary(prompt)
    for drafter in (draft, speculative.NgramDraft()):
        plain = speculative.speculative_generate(target, drafter, ids, 16, 3, 1.0,
                                                 np.random.default_rng(5))
        _, cache = target.run_with_cache(ids, compact=True)
        kv = target.kv_from_recording(cache, len(ids))
        started = speculative.speculative_generate(target, drafter, ids, 16, 3, 1.0,
                                                   np.random.default_rng(5), prompt_kv=kv)
        assert started.tokens == plain.tokens
        assert [(r.n_accepted, len(r.proposals)) for r in started.rounds] == \
            [(r.n_accepted, len(r.proposals)) for r in plain.rounds]


def test_greedy_at_the_end_of_the_context(austen_pair):
    target, draft = austen_pair
    ids = target.tokenizer.encode_ordinary(" the" * 250)[:250]
    expected = [p.token for p in decode_loop(target, ids, 20)]    # stops when the window is full
    run = speculative.speculative_generate(target, draft, ids, 20, 5, temperature=0.0)
    assert run.tokens == expected and len(ids) + len(expected) == 257
    assert run.finish == "context"


def test_greedy_stops_at_end_of_text(pair):
    target, draft = pair
    eos = target.config.eos_token_id
    # find a prompt whose greedy text reaches the end-of-text token
    for start in range(320):
        expected = [p.token for p in decode_loop(target, [start], 40)]
        if expected[-1] == eos and len(expected) < 40:
            break
    else:
        pytest.fail("no greedy text ends in the end-of-text token")
    run = speculative.speculative_generate(target, draft, [start], 40, 3, temperature=0.0)
    assert run.tokens == expected and run.finish == "eos"


# --- draft checks and the formula --------------------------------------------------------------

def test_a_draft_with_another_tokenizer_is_refused(austen_pair, pair):
    target, draft = austen_pair
    speculative.check_draft(target, draft)
    with pytest.raises(speculative.DraftMismatch, match="vocabulary has 320 tokens"):
        speculative.check_draft(target, pair[1])
    ranks = {b: target.tokenizer.encode_single_token(b)
             for b in target.tokenizer.token_byte_values()}
    a, b = b"the", b" the"
    ranks[a], ranks[b] = ranks[b], ranks[a]             # two tokens trade ids
    other = tiktoken.Encoding("swapped", pat_str=r"\S+|\s+", mergeable_ranks=ranks,
                              special_tokens={"<|endoftext|>": 4095})
    swapped = Model(draft.config, draft.params, other)
    with pytest.raises(speculative.DraftMismatch, match="tokenizer differs"):
        speculative.check_draft(target, swapped)


def test_expected_speedup():
    # a = 0.5, gamma = 2, c = 0.1: (1 - 0.125) / (0.5 * 1.2)
    assert speculative.expected_speedup(0.5, 2, 0.1) == pytest.approx(0.875 / 0.6)
    assert speculative.expected_tokens_per_pass(1.0, 4) == 5          # the a -> 1 limit
    assert speculative.expected_speedup(0.0, 3, 0.5) == pytest.approx(1 / 2.5)
    assert speculative.expected_tokens_per_pass(0.999999, 4) == pytest.approx(5, rel=1e-5)


def test_timed_generation_is_decode_loop(austen_pair):
    target, _ = austen_pair
    ids = target.tokenizer.encode_ordinary("Emma was")
    timed = speculative.timed_generate(target, ids, 12, temperature=0.0)
    assert timed.tokens == [p.token for p in decode_loop(target, ids, 12)]
    assert len(timed.step_seconds) == 11 and timed.seconds > sum(timed.step_seconds) > 0


# --- prompt lookup (n-gram) draft: the same rule with q a point mass -----------------------------

def test_ngram_lookup_takes_the_longest_latest_match():
    look = speculative.ngram_lookup
    #        0  1  2  3  4  5  6  7  8  9
    seq = [1, 2, 3, 4, 5, 1, 2, 3, 9, 1, 2, 3]
    # the last 3 tokens (1 2 3) occur at 0 and at 5: the latest, at 5, is followed by 9 1 2 3
    assert look(seq, 4) == speculative.Lookup(3, 5, (9, 1, 2, 3))
    assert look(seq, 2) == speculative.Lookup(3, 5, (9, 1))
    # no 3-gram match: falls back to 2, then 1
    assert look([7, 8, 9, 5, 8, 9], 3) == speculative.Lookup(2, 1, (5, 8, 9))
    assert look([7, 8, 9, 5, 6, 9], 3) == speculative.Lookup(1, 2, (5, 6, 9))
    # fewer than gamma tokens follow the match: only those are proposed
    assert look([4, 5, 6, 4], 5) == speculative.Lookup(1, 0, (5, 6, 4))
    # the end repeats itself: the match may overlap the end
    assert look([3, 3, 3, 3], 4) == speculative.Lookup(3, 0, (3,))
    # nothing to find
    for seq in ([], [5], [1, 2, 3, 4]):
        assert look(seq, 4) == speculative.Lookup(0, -1, ())
    assert look([1, 2, 1], 0) == speculative.Lookup(0, -1, ())
    # max_n / min_n bound the n-gram length
    assert look([1, 2, 3, 9, 1, 2, 3], 2, max_n=2) == speculative.Lookup(2, 1, (9, 1))
    assert look([7, 8, 9, 5, 6, 9], 3, min_n=2) == speculative.Lookup(0, -1, ())


def test_a_point_mass_proposal_is_kept_with_probability_p_and_gives_p():
    """q = 1 on the proposal: accepted with probability p(d), otherwise a draw from p without d;
    together exactly p."""
    n, d = 20_000, 1
    q = speculative.point_mass(d, len(P))
    rng = np.random.default_rng(0)
    tokens, kept = [], 0
    for _ in range(n):
        ok, _, replacement = speculative.accept_or_resample(d, P, q, rng)
        kept += ok
        tokens.append(d if ok else replacement)
    counts = np.bincount(tokens, minlength=len(P))
    assert not chi_square_rejects(counts, P)
    assert counts[d] < 0.5 * n                         # not the lookup's own choice
    assert abs(kept / n - P[d]) < 4 * math.sqrt(P[d] * (1 - P[d]) / n)
    r = speculative.residual(P, q)
    np.testing.assert_allclose(r, np.where(np.arange(len(P)) == d, 0, P) / (1 - P[d]))


@pytest.fixture(scope="module")
def lookup_prompt(pair):
    """A prompt ending in an n-gram seen before, whose looked-up proposal c the target gives a
    probability nearest 1/2 at temperature 0.5 (so both outcomes are exercised): [a, b, c, a, b]."""
    target, _ = pair
    best = None
    for c in range(320):
        prompt = [5, 77, c, 5, 77]
        p = softmax(target.forward(prompt)[-1] / 0.5)[c]
        if best is None or abs(p - 0.5) < abs(best[1] - 0.5):
            best = (prompt, p)
    assert 0.1 < best[1] < 0.9
    return best[0]


def test_lookup_draft_first_two_tokens_follow_the_target(pair, lookup_prompt):
    target, _ = pair
    prompt, t = lookup_prompt, 0.5
    assert speculative.ngram_lookup(prompt, 2).tokens == (prompt[2], prompt[3])
    p1 = softmax(target.forward(prompt)[-1] / t)
    p2 = sum(p1[x] * softmax(target.forward(prompt + [x])[-1] / t) for x in range(320))
    rng = np.random.default_rng(7)
    firsts, seconds, runs = [], [], []
    for _ in range(2000):
        run = speculative.speculative_generate(target, speculative.NgramDraft(), prompt, 3,
                                               gamma=2, temperature=t, rng=rng,
                                               stop_at_eos=False)
        firsts.append(run.tokens[0])
        seconds.append(run.tokens[1])
        runs.append(run)
    c1, c2 = np.bincount(firsts, minlength=320), np.bincount(seconds, minlength=320)
    assert not chi_square_rejects(c1, p1)
    assert not chi_square_rejects(c2, p2)
    assert c1[prompt[2]] < 0.9 * len(runs)            # not always the lookup's own choice
    rate = sum(r.accepted for r in runs) / sum(r.proposed for r in runs)
    assert 0.05 < rate < 0.95
    first = runs[0].rounds[0]
    assert first.lookup == speculative.Lookup(2, 0, (prompt[2], prompt[3]))
    assert all(p.q == 1.0 for r in runs for rd in r.rounds for p in rd.proposals)
    assert all(r.draft_steps == 0 for r in runs)


def test_lookup_rounds_add_up(pair, lookup_prompt):
    target, _ = pair
    prompt = lookup_prompt * 3
    run = speculative.speculative_generate(target, speculative.NgramDraft(), prompt, 30,
                                           gamma=4, temperature=1.0,
                                           rng=np.random.default_rng(1), stop_at_eos=False)
    assert len(run.tokens) == 30
    assert sum((r.tokens for r in run.rounds), []) == run.tokens
    x = list(prompt)
    for r in run.rounds:
        assert r.lookup == speculative.ngram_lookup(x, min(4, 30 - (len(x) - len(prompt)) - 1))
        assert [p.token for p in r.proposals] == list(r.lookup.tokens)[:len(r.proposals)]
        assert all(p.accepted for p in r.proposals[:-1])
        assert (r.kind == "bonus") == all(p.accepted for p in r.proposals)
        for pr in r.proposals:
            assert pr.q == 1.0 and pr.accepted == (pr.u < pr.p)
        x += r.tokens
    assert run.proposed > 0


@pytest.mark.parametrize("gamma", [1, 3, 8])
def test_greedy_lookup_is_the_targets_greedy_text_tiny(pair, lookup_prompt, gamma):
    target, _ = pair
    for prompt in (lookup_prompt, [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], [8]):
        expected = [p.token for p in decode_loop(target, prompt, 40, stop_at_eos=False)]
        run = speculative.speculative_generate(target, speculative.NgramDraft(), prompt, 40,
                                               gamma, temperature=0.0, stop_at_eos=False)
        assert run.tokens == expected


@pytest.mark.parametrize("prompt,gamma", [
    ("It is a truth universally acknowledged, that a single man", 4),
    ("“I cannot", 8),
    ("Mr. Darcy and Mr. Bingley and Mr. Darcy and Mr.", 3),
    ("E", 2),
])
def test_greedy_lookup_is_the_targets_greedy_text(austen_pair, prompt, gamma):
    target, _ = austen_pair
    ids = target.tokenizer.encode_ordinary(prompt)
    expected = [p.token for p in decode_loop(target, ids, 40)]
    run = speculative.speculative_generate(target, speculative.NgramDraft(), ids, 40, gamma,
                                           temperature=0.0, rng=np.random.default_rng(0))
    assert run.tokens == expected and run.draft_steps == 0


def test_greedy_lookup_at_the_end_of_the_context(austen_pair):
    target, _ = austen_pair
    ids = target.tokenizer.encode_ordinary(" the" * 250)[:250]
    expected = [p.token for p in decode_loop(target, ids, 20)]
    run = speculative.speculative_generate(target, speculative.NgramDraft(), ids, 20, 5,
                                           temperature=0.0)
    assert run.tokens == expected and run.finish == "context"
    assert run.proposed > 0                            # " the the the": lookup finds it


def test_greedy_lookup_on_smollm2(smollm2):
    target = smollm2
    ids = target.tokenizer.encode_ordinary(
        "def square(x):\n    return x * x\n\n\ndef cube(x):\n    return x * x * x\n\n\n"
        "def fourth_power(x):\n    return")
    expected = [p.token for p in decode_loop(target, ids, 16)]
    run = speculative.speculative_generate(target, speculative.NgramDraft(), ids, 16, 4,
                                           temperature=0.0)
    assert run.tokens == expected
    assert len(run.rounds) < 16 and run.accepted > 0   # the code repeats: lookup saved passes




# --- rows already known: the target's greedy run read instead of passes ----------------------

class GreedyRows:
    """The target's greedy run as known_rows: the logits of each of its steps, by the text
    before it (counting the texts asked for)."""

    def __init__(self, target, ids, n):
        steps = list(decode_loop(target, ids, n))
        texts = [tuple(ids) + tuple(p.token for p in steps[:k]) for k in range(len(steps))]
        self.rows = {t: p.logits for t, p in zip(texts, steps, strict=True)}
        self.asked = self.found = 0

    def get(self, text):
        self.asked += 1
        row = self.rows.get(tuple(text))
        self.found += row is not None
        return row


def rounds_of(run):
    return [([(p.token, p.p, p.q, p.u, p.accepted) for p in r.proposals], r.token, r.kind,
             r.p, r.lookup) for r in run.rounds]


@pytest.mark.parametrize("prompt,gamma", [
    ("Mr. Darcy and Mr. Bingley and Mr. Darcy and Mr.", 3),
    ("It is a truth universally acknowledged, that a single man", 1),
    ("It is a truth universally acknowledged, that a single man", 8),
])
@pytest.mark.parametrize("drafter", ["lookup", "model"])
def test_greedy_with_the_targets_rows_runs_no_pass_and_decides_the_same(austen_pair, prompt,
                                                                         gamma, drafter):
    """Greedy verification reads only rows on the target's own greedy path: given its greedy
    run's rows, no round runs a pass, and every proposal, decision, p, q, u and token is the
    run's without them."""
    target, draft_model = austen_pair
    draft = speculative.NgramDraft() if drafter == "lookup" else draft_model
    ids = target.tokenizer.encode_ordinary(prompt)
    plain = speculative.speculative_generate(target, draft, ids, 24, gamma, temperature=0.0,
                                             rng=np.random.default_rng(3))
    known = GreedyRows(target, ids, 24)
    read = speculative.speculative_generate(target, draft, ids, 24, gamma, temperature=0.0,
                                            rng=np.random.default_rng(3), known_rows=known)
    assert read.tokens == plain.tokens == [p.token for p in decode_loop(target, ids, 24)]
    assert rounds_of(read) == rounds_of(plain)
    assert plain.proposed > 0 and known.found == known.asked > 0
    assert all(r.target_seconds == 0 and r.n_fed == 0 for r in read.rounds)
    assert all(r.n_fed > 0 for r in plain.rounds)


def test_sampling_with_rows_known_runs_a_pass_where_one_is_missing(austen_pair):
    """Sampled, the text leaves the greedy path: the rounds whose rows are not known run their
    pass over the text the target has not read yet, and the run is the one without rows."""
    target, _ = austen_pair
    ids = target.tokenizer.encode_ordinary("Mr. Darcy and Mr. Bingley and Mr. Darcy and Mr.")
    plain = speculative.speculative_generate(target, speculative.NgramDraft(), ids, 24, 4,
                                             temperature=1.0, rng=np.random.default_rng(5))
    known = GreedyRows(target, ids, 24)
    read = speculative.speculative_generate(target, speculative.NgramDraft(), ids, 24, 4,
                                            temperature=1.0, rng=np.random.default_rng(5),
                                            known_rows=known)
    assert read.tokens == plain.tokens
    assert [(r.token, r.kind, [p.accepted for p in r.proposals]) for r in read.rounds] == \
        [(r.token, r.kind, [p.accepted for p in r.proposals]) for r in plain.rounds]
    passes = [i for i, r in enumerate(read.rounds) if r.n_fed]
    assert 0 < len(passes) < len(read.rounds) and known.found > 0
    # the first pass after rounds read from known rows reads the whole tail the target skipped
    # (the prompt's last token and every token those rounds added) and the proposals
    k = passes[0]
    skipped = 1 + sum(len(r.tokens) for r in read.rounds[:k])
    assert k > 0 and read.rounds[k].n_fed >= skipped + len(read.rounds[k].proposals)


# --- a run continued from another setting's run: the run from the prompt, exactly --------------

def exact_rounds(run):
    """Everything a round decided, floats bit for bit, and what the verification pass read."""
    return [([(p.token, p.p, p.q, p.u, p.accepted) for p in r.proposals], r.token, r.kind,
             r.p, r.lookup, r.n_fed) for r in run.rounds]


RESUMED = [(24, 4, 25, 4), (24, 4, 23, 4), (24, 4, 12, 4), (12, 4, 24, 4), (24, 4, 24, 5),
           (24, 5, 24, 4), (24, 4, 24, 1), (24, 8, 30, 2)]


@pytest.mark.parametrize("temperature", [1.0, 0.0])
@pytest.mark.parametrize("drafter", ["lookup", "model"])
@pytest.mark.parametrize("n_before,gamma_before,n,gamma", RESUMED)
def test_a_run_continued_from_another_settings_run_is_the_run_from_the_prompt(
        austen_pair, drafter, temperature, n_before, gamma_before, n, gamma):
    """One token more or fewer, another γ: the run that continues from a kept run's rounds
    (the rounds both make, then its caches and generator state) has the tokens, proposals,
    probabilities, draws and passes of the run started from the prompt."""
    target, draft_model = austen_pair
    draft = speculative.NgramDraft() if drafter == "lookup" else draft_model
    ids = target.tokenizer.encode_ordinary("Mr. Darcy and Mr. Bingley and Mr. Darcy and Mr.")
    before = speculative.speculative_generate(target, draft, ids, n_before, gamma_before,
                                              temperature, np.random.default_rng(11))
    plain = speculative.speculative_generate(target, draft, ids, n, gamma, temperature,
                                             np.random.default_rng(11))
    kept_cache = before.kept[0].k[:, :len(before.kept[0])].copy()
    resumed = speculative.speculative_generate(target, draft, ids, n, gamma, temperature,
                                               np.random.default_rng(11), resume=before)
    assert resumed.tokens == plain.tokens and resumed.finish == plain.finish
    assert exact_rounds(resumed) == exact_rounds(plain)
    assert resumed.draft_steps == plain.draft_steps
    assert [c.n_new for c in resumed.checkpoints] == [c.n_new for c in plain.checkpoints]
    # the kept run is left as it was: another setting can continue from it again
    np.testing.assert_array_equal(before.kept[0].k[:, :len(before.kept[0])], kept_cache)


def test_the_rounds_a_continued_run_takes(austen_pair):
    """Lookup finds the same tokens whatever γ when it finds fewer than γ: those rounds are
    taken; one token more changes only the rounds whose proposals the length limited."""
    target, _ = austen_pair
    lookup = speculative.NgramDraft()
    ids = target.tokenizer.encode_ordinary("Mr. Darcy and Mr. Bingley and Mr. Darcy and Mr.")
    run = speculative.speculative_generate(target, lookup, ids, 24, 4, 1.0,
                                           np.random.default_rng(11))
    drafter = speculative.drafter_for(lookup)
    ctx = target.config.n_ctx
    assert speculative.same_rounds(run, ids, 24, 4, ctx, drafter) == len(run.rounds)
    # γ 5: taken up to the first round whose lookup finds other tokens with γ 5 (it found 4,
    # as many as γ 4 allowed, and more follow the match)
    text = ids + run.tokens
    found = [speculative.ngram_lookup(text[:len(ids) + c.n_new], min(5, 24 - c.n_new - 1))
             for c in run.checkpoints[:-1]]
    differ = next(i for i, (f, r) in enumerate(zip(found, run.rounds, strict=True))
                  if f != r.lookup)
    assert len(run.rounds[differ].lookup.tokens) == 4 and len(found[differ].tokens) == 5
    assert speculative.same_rounds(run, ids, 24, 5, ctx, drafter) == differ
    # one more token: rounds that asked for fewer than γ because of the length differ
    limited = next((i for i, c in enumerate(run.checkpoints[:-1])
                    if c.g < 4 and c.g == 24 - c.n_new - 1), len(run.rounds))
    assert speculative.same_rounds(run, ids, 25, 4, ctx, drafter) >= limited
    assert speculative.same_rounds(run, ids[1:], 24, 4, ctx, drafter) == -1
