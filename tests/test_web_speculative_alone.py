"""The speculative-decoding section's target alone (web/sections/speculative.py alone_run): in
greedy mode every draw is the top token whatever the seed, so it is run once per prompt and
length and is the model's greedy continuation computed from scratch; on a big model it is the
greedy run whose rows every greedy setting's verification reads (greedy_run)."""
from pipeline.decoding import continue_batch
from pipeline.sampling import greedy
from web.sections.speculative import _runs, alone_run

PROMPT = "Jane was first to speak of the ball at Netherfield"


def test_greedy_alone_is_the_greedy_continuation_once_whatever_the_seed(client, model):
    ids = tuple(model.tokenizer.encode_ordinary(PROMPT))
    reference = tuple(continue_batch(model, ids, [greedy], 10)[0].tokens)
    before = _runs.computed
    assert alone_run(model, ids, 10, "greedy", 3) == reference
    assert alone_run(model, ids, 10, "greedy", 4077) == reference
    assert _runs.computed == before + 1


def test_sampled_alone_keeps_its_seed(client, model):
    ids = tuple(model.tokenizer.encode_ordinary(PROMPT))
    before = _runs.computed
    runs = {alone_run(model, ids, 10, "sample", seed) for seed in range(4)}
    assert _runs.computed == before + 4 and len(runs) > 1


def test_a_big_models_greedy_run_is_read_by_every_setting_and_is_the_real_run(smol_app):
    """On SmolLM2 greedy mode reads the target's rows from its greedy run on the prompt,
    computed once for every gamma, length and seed: the rounds, decisions and text are the
    speculative run that verifies with passes, and the target alone's text is its greedy
    continuation."""
    import numpy as np

    from pipeline.speculative import speculative_generate
    from web.sections.speculative import LOOKUP, _greedy, greedy_run, live_run
    lm = smol_app.extensions["explainer"].models["smollm2"]
    target = lm.model
    with smol_app.app_context():
        ids = tuple(target.tokenizer.encode_ordinary(lm.default_prompt))
        before = _greedy.computed
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
        assert _greedy.computed - before <= 1               # one greedy run for all of them
        run = greedy_run(target, ids)
        assert run.tokens[:12] == tuple(continue_batch(target, ids, [greedy], 12)[0].tokens)
        # the settings the page opens on (SmolLM2's own) accept a guess
        assert live_run(target, LOOKUP, ids, 4, 32, "greedy", 0).accepted >= 1
