"""The speculative-decoding section's target alone (web/sections/speculative.py alone_run): in
greedy mode every draw is the top token whatever the seed, so it is run once per prompt and
length and is the model's greedy continuation computed from scratch."""
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
