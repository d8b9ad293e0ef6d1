"""The speculative-decoding section's target alone (web/sections/speculative.py alone_run): in
greedy mode every draw is the top token whatever the seed, so it is run once per prompt and
length and is the model's greedy continuation computed from scratch; on a big model it is the
greedy run whose rows every greedy setting's verification reads (greedy_run)."""
import numpy as np

from pipeline.decoding import continue_batch
from pipeline.sampling import draw, greedy
from pipeline.speculative import NgramDraft, distribution_at, speculative_generate
from web.sections.speculative import _alone, alone_run, live_run

PROMPT = "Jane was first to speak of the ball at Netherfield"


def test_greedy_alone_is_the_greedy_continuation_once_whatever_the_seed(client, model):
    ids = tuple(model.tokenizer.encode_ordinary(PROMPT + ", said Mary"))   # not run before
    reference = tuple(continue_batch(model, ids, [greedy], 10)[0].tokens)
    before = _alone.computed
    assert alone_run(model, ids, 10, "greedy", 3) == reference
    assert alone_run(model, ids, 10, "greedy", 4077) == reference
    assert _alone.computed == before + 1


def test_sampled_alone_keeps_its_seed(client, model):
    ids = tuple(model.tokenizer.encode_ordinary(PROMPT))
    before = _alone.computed
    runs = {alone_run(model, ids, 10, "sample", seed) for seed in range(4)}
    assert _alone.computed == before + 4 and len(runs) > 1


def sampled_alone(model, ids, n, seed):
    """The target alone sampled with the seed, from the prompt: the reference."""
    rng, probs = np.random.default_rng(seed), distribution_at(1.0)
    return tuple(continue_batch(model, ids, [lambda logits, _: draw(probs(logits), rng)],
                                n)[0].tokens)


def test_a_longer_or_shorter_alone_text_goes_on_from_the_kept_one(client, model):
    """One token more continues the kept run (its cache and generator), one fewer is its start:
    each is the run from the prompt with that seed, token for token, and the run is computed
    once for every length."""
    ids = tuple(model.tokenizer.encode_ordinary(PROMPT + " again"))
    before = _alone.computed
    for n in (10, 11, 9, 16, 4):
        assert alone_run(model, ids, n, "sample", 21) == sampled_alone(model, ids, n, 21)
    assert _alone.computed == before + 1


def exact(run):
    return [([(p.token, p.p, p.q, p.u, p.accepted) for p in r.proposals], r.token, r.kind,
             r.p, r.lookup, r.n_fed) for r in run.rounds]


def test_a_setting_next_to_a_computed_one_continues_its_run(client, model):
    """The page's run at one more token, or another γ, is taken from the last runs of the same
    prompt, mode and seed where they make the same rounds (the very rounds kept), then goes
    on: the run from the prompt exactly."""
    ids = tuple(model.tokenizer.encode_ordinary("Mr. Darcy and Mr. Bingley and Mr. Darcy and Mr."))
    lookup = NgramDraft(max_n=3, min_n=1)
    first = live_run(model, lookup, ids, 4, 20, "sample", 8)
    for gamma, n in ((4, 21), (4, 19), (2, 21), (5, 20)):
        shown = live_run(model, lookup, ids, gamma, n, "sample", 8)
        real = speculative_generate(model, lookup, list(ids), n, gamma, 1.0,
                                    np.random.default_rng(8))
        assert shown.tokens == real.tokens and exact(shown) == exact(real)
    longer = live_run(model, lookup, ids, 4, 21, "sample", 8)
    assert longer.rounds[0] is first.rounds[0]          # taken, not computed again


def test_a_big_models_greedy_run_is_read_by_every_setting_and_is_the_real_run(smol_app):
    """On SmolLM2 greedy mode reads the target's rows from its greedy run on the prompt,
    computed once for every gamma, length and seed: the rounds, decisions and text are the
    speculative run that verifies with passes, and the target alone's text is its greedy
    continuation."""
    import numpy as np

    from pipeline.speculative import speculative_generate
    from web.model_state.greedy import _paths
    from web.sections.speculative import LOOKUP, greedy_run, live_run
    lm = smol_app.extensions["explainer"].models["smollm2"]
    target = lm.model
    with smol_app.app_context():
        ids = tuple(target.tokenizer.encode_ordinary(lm.default_prompt))
        before = _paths.computed
        for gamma, n, seed in ((4, 32, 0), (1, 33, 7), (8, 20, 0)):
            shown = live_run(target, LOOKUP, ids, gamma, n, "greedy", seed)
            real = speculative_generate(target, LOOKUP, list(ids), n, gamma, 0.0,
                                        np.random.default_rng(seed))
            assert shown.tokens == real.tokens
            assert [(r.token, r.kind, [(p.token, p.p, p.u, p.accepted) for p in r.proposals])
                    for r in shown.rounds] == \
                [(r.token, r.kind, [(p.token, p.p, p.u, p.accepted) for p in r.proposals])
                 for r in real.rounds]
            assert all(r.n_fed == 0 for r in shown.rounds)       # no pass run again
            assert alone_run(target, ids, n, "greedy", seed) == tuple(real.tokens)
        assert _paths.computed - before <= 1               # one greedy run for all of them
        run = greedy_run(target, ids)
        assert run.tokens[:12] == tuple(continue_batch(target, ids, [greedy], 12)[0].tokens)
        # the settings the page opens on (SmolLM2's own) accept a guess
        assert live_run(target, LOOKUP, ids, 4, 32, "greedy", 0).accepted >= 1


def test_a_big_models_greedy_run_goes_as_far_as_asked(smol_app):
    """The greedy run a big model's greedy settings read is computed as far as a run asks (its
    first n rows), made longer for a longer run: each step once, and the run read from it is the
    speculative run that verifies with passes."""
    from web.sections.speculative import LOOKUP, greedy_run
    lm = smol_app.extensions["explainer"].models["smollm2"]
    target = lm.model
    with smol_app.app_context():
        ids = tuple(target.tokenizer.encode_ordinary("One, two, three, one, two,"))
        longest = 0
        for n in (6, 9, 7):
            shown = live_run(target, LOOKUP, ids, 3, n, "greedy", 0)
            real = speculative_generate(target, LOOKUP, list(ids), n, 3, 0.0,
                                        np.random.default_rng(0))
            assert shown.tokens == real.tokens and \
                [(r.token, r.kind, [(p.token, p.p, p.u, p.accepted) for p in r.proposals])
                 for r in shown.rounds] == \
                [(r.token, r.kind, [(p.token, p.p, p.u, p.accepted) for p in r.proposals])
                 for r in real.rounds]
            longest = max(longest, n)
            assert len(greedy_run(target, ids, 0).tokens) == longest    # no step more
        assert len(greedy_run(target, ids, 0).rows) == 9
