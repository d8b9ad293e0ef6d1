"""The model's own greedy continuation of a prompt, computed once per (model, prompt) and read by
every section that shows one.

Four sections show greedy generation on the prompt: the KV cache section (its cached steps and
the cache's size after each), speculative decoding (the target's rows its greedy verification
reads, and the target alone's text), greedy vs beam search (greedy's line) and the generation
loop (its steps with the greedy chooser). A greedy step depends only on the tokens before it,
so they are one run (pipeline.cached_generation.CachedSteps): `greedy_path(model, ids)` starts
it from the prompt's shared run (web.model_state.forward.prefilled: the prompt is not run again)
and its `upto(n)` makes it longer when a reader asks for more, one `Model.decode` step per token
in the same KV cache, each step once. A shorter run is the first steps of a longer one.

The run goes on past the end-of-text token (the KV cache section feeds every greedy token back;
the other readers stop there) and stops only when the context window is full. Its KV cache
starts with room for CAPACITY tokens and doubles when full (KVCache.reserve), so the sizes it
records after each step are the ones the KV cache section shows. What it keeps per step: the
token, the logits it was chosen from (the first rows: speculative decoding and the KV cache
check read them), the cache's size, and the wall time of the decode step.
"""
from pipeline.cached_generation import CachedSteps
from web.core.cache import memo, model_key
from web.model_state.forward import prefilled

CAPACITY = 16           # tokens the run's KV cache reserves at first (then it doubles)


# A big model's runs are kept for a class's prompts (each student's, from the section that
# first asks for it to the others they open later): SmolLM2's 20-token run is ~5 MB (its rows
# and its cache), and a run evicted is made again, a decode step per token.
_paths = memo("greedy paths", 16, big_size=32, big_bytes=160 << 20,
              weigh=lambda path: path.nbytes)


def greedy_path(model, ids: tuple, n: int = 1) -> CachedSteps:
    """The model's greedy run on these token ids, at least n steps of it: one per (model,
    prompt), made longer when a longer one is asked for."""
    return _paths.get((model_key(model), tuple(int(t) for t in ids)),
                      lambda: CachedSteps(model, ids, CAPACITY,
                                          start=prefilled(model, ids, CAPACITY))).upto(n)

