"""The generation loop: step through it, watch it stream, and see why prefill and decode differ.

Every number comes from the running model: the steps from pipeline.generation.generation_steps
(Model.prefill / Model.decode), computed per prompt; the prefill and decode times from the
model's cost table (web.model_state.measured.cost_table, measured once per model over several
lengths and
interpolated to the prompt's length, the same values every timing section quotes); the byte
and FLOP counts from the loaded arrays.
"""
import urllib.parse

from pipeline import cached_generation
from pipeline.generation import Step, finish_reason, generation_steps
from pipeline.roofline import decode_work, model_costs, prefill_work, roofline
from web.core.cache import memo
from web.core.params import Param
from web.core.sampler_settings import CHOOSERS, described, sampler_for, settings_from
from web.figures import generation as figures
from web.model_state import greedy as shared_greedy
from web.model_state.forward import prefilled, prompt_ids
from web.model_state.measured import cost_table, machine, model_key, stamp
from web.presentation.tokens import token_pieces
from web.sections import Section
from web.sections.sampling import SAMPLER

MAX_NEW_TOKENS = 200       # the most a request may generate (a classroom shares 2 cores)
N_TOP = cached_generation.N_TOP  # candidates shown per step (the shared run keeps as many)

PARAMS = (
    Param("gen_step", "Generation step", kind="int", default=0, min=0,
          max=MAX_NEW_TOKENS - 1, resets_with_prompt=True),
    Param("gen_max", "New-token limit", kind="int", default=20, min=1, max=MAX_NEW_TOKENS,
          big_default=8),
    Param("gen_pace", "Pause between streamed tokens (ms)", kind="int", default=50, min=0,
          max=500),
    Param("gen_choose", "The token chooser", default="greedy", choices=CHOOSERS),
)


def sampler_description(state) -> str:
    if state["gen_choose"] == "greedy":
        return "greedily: the most probable token at every step"
    return f"by the sampler of the Sampling section ({described(state)})"


def sampler_key(state) -> tuple:
    if state["gen_choose"] == "greedy":
        return ("greedy",)
    return ("sampler", settings_from(state), state["s_seed"])


STREAM_PARAMS = ("prompt", "gen_max", "gen_pace", "gen_choose", *SAMPLER)


def stream_query(state) -> str:
    """The query of /generate/stream for this state: only what the stream reads."""
    return urllib.parse.urlencode([(name, str(state[name])) for name in STREAM_PARAMS],
                                  quote_via=urllib.parse.quote)


# --- the stepped run: computed once per (model, prompt, limit, sampler) -----------------------

_runs = memo("generation runs", 16)


def stepped_run(lm, ids: tuple, max_new_tokens: int, sample, sample_key: tuple,
                timed=lambda steps: steps) -> tuple:
    """The loop's steps; `sample_key` names the chooser (a seeded one always draws alike).
    `timed` wraps the steps as they are made (Query.in_time: the request's time budget)."""
    # Its times are not shown (the page's one measurement is: web.model_state.measured), so it
    # starts from
    # the prompt's shared run (web.model_state.forward.prefilled) instead of running the prompt
    # again; the greedy chooser's steps are the prompt's greedy run the other sections read
    # too (web.model_state.greedy), each step computed once for every limit.
    if sample_key == ("greedy",):
        return _runs.get((model_key(lm.model), ids, max_new_tokens, sample_key),
                         lambda: tuple(timed(greedy_steps(lm.model, ids, max_new_tokens))))
    return _runs.get((model_key(lm.model), ids, max_new_tokens, sample_key),
                     lambda: tuple(timed(generation_steps(lm.model, ids, max_new_tokens,
                                                          sample=sample, n_top=N_TOP,
                                                          start=prefilled(lm.model, ids)))))


def greedy_steps(model, ids: tuple, max_new_tokens: int):
    """What generation_steps yields with the greedy chooser from the prompt's shared run, read
    from the prompt's greedy run (web.model_state.greedy), made longer one step at a time (so
    that the request's time budget is checked between steps, as for the loop)."""
    eos, n_ctx = model.config.eos_token_id, model.config.n_ctx
    path = shared_greedy.greedy_path(model, ids)
    for k in range(max_new_tokens):
        path.upto(k + 1)
        if k >= len(path.tokens):                    # the context window is full
            return
        token = path.tokens[k]
        finish = finish_reason(token, len(ids) + k + 1, k + 1, max_new_tokens, n_ctx, eos)
        yield Step(k, "prefill" if k == 0 else "decode",
                   tuple(ids) if k == 0 else (path.tokens[k - 1],), path.sizes[k][0], token,
                   path.seconds[k], path.step_seconds[k], finish, prob=path.probs[k],
                   top=path.tops[k][:N_TOP])
        if finish:
            return


class Chip:
    """What macros.chip draws: a token's id and its text as pieces."""

    def __init__(self, tokenizer, token_id: int):
        self.id = token_id
        self.pieces = token_pieces(tokenizer, token_id)


def warm(lm):
    cost_table(lm)
    machine()


def costs(lm, n_prompt: int, prefill_s: float, decode_s: float) -> dict:
    """What a prefill of n_prompt tokens and the decode step after it read and compute (the
    roofline section's formulas, float32: 4 bytes per weight and per cached value), the
    speeds the measured times give, and this server's measured roof."""
    model = lm.model
    mc = model_costs(model.config, model.n_params(), 4, 4)
    pre, dec = prefill_work(mc, n_prompt), decode_work(mc, n_prompt)
    roof = machine()
    return dict(
        n_params=model.n_params(), matmul_params=mc.matmul_params,
        weight_bytes=mc.weight_bytes, kv_bytes=(n_prompt + 1) * mc.kv_bytes_per_token,
        attention_flops_decode=mc.attn_flops_per_pair * (n_prompt + 1),
        prefill=pre, decode=dec,
        prefill_gflops=pre.flops / prefill_s / 1e9, decode_gflops=dec.flops / decode_s / 1e9,
        decode_gbps=dec.bytes / decode_s / 1e9,
        peak_gflops=roof.peak_flops / 1e9, bandwidth_gbps=roof.bandwidth / 1e9,
        ridge=roof.peak_flops / roof.bandwidth,
        prefill_bound=roofline(pre, roof.peak_flops, roof.bandwidth).bound,
        decode_bound=roofline(dec, roof.peak_flops, roof.bandwidth).bound,
        per_token_ratio=decode_s / (prefill_s / n_prompt),
    )


_figures = memo("generation figures", 16)


def sweep_rows(table) -> list:
    """The cost table's prefill and decode entries, one row per length timed."""
    return [dict(n=n, prefill_s=table.prefill[n].median, decode_s=table.decode[n].median,
                 prefill=table.prefill_at(n), decode=table.decode_at(n))
            for n in sorted(table.decode)]


def sweep_figure(lm, table, n: int, prefill, decode) -> str:
    """The cost table's lengths with the prompt's (interpolated) point marked, built once per
    length."""
    return _figures.get((model_key(lm.model), table.measured_at, n),
                        lambda: figures.prefill_decode_figure(sweep_rows(table), n,
                                                              prefill.seconds, decode.seconds))


# --- the section -----------------------------------------------------------------------------

def build(lm, state) -> dict:
    """Template context for the generation-loop section."""
    tok = lm.tokenizer
    ids = prompt_ids(lm, state["prompt"])
    sample = sampler_for(state)                     # first: it refuses a bad sampler setting
    # up to 200 decode steps: past the request's time budget the limit goes back to its default
    steps = stepped_run(lm, ids, state["gen_max"], sample, sampler_key(state),
                        lambda run: state.in_time("gen_max", run))
    step = state.index_within("gen_step", len(steps), "step",
                              "with this prompt and limit the loop makes")
    current = steps[step]
    chosen_in_top = any(i == current.token for i, _ in current.top)
    candidates = [dict(chip=Chip(tok, i), prob=p, chosen=i == current.token)
                  for i, p in current.top]
    if not chosen_in_top:
        candidates.append(dict(chip=Chip(tok, current.token), prob=current.prob, chosen=True))

    table = cost_table(lm)                     # measured once per model, not per prompt
    n_prompt = len(ids)
    prefill, decode = table.prefill_at(n_prompt), table.decode_at(n_prompt)
    return dict(
        n_prompt=len(ids), prompt_chips=[Chip(tok, i) for i in ids],
        generated_chips=[Chip(tok, s.token) for s in steps[:step + 1]],
        steps=steps, step=step, current=current, last_step=len(steps) - 1,
        candidates=candidates, eos_id=lm.model.config.eos_token_id,
        sampler=sampler_description(state), choose=state["gen_choose"], choosers=CHOOSERS,
        sampler_params=SAMPLER,
        max_new_tokens=MAX_NEW_TOKENS,
        n_ctx=lm.n_ctx, model_name=lm.name,
        stream_query=stream_query(state),
        stream_blocked=any(name in state.errors for name in STREAM_PARAMS),
        measured_at=stamp(table.measured_at), prefill=prefill, decode=decode,
        prefill_ms=prefill.ms, decode_ms=decode.ms,
        costs=costs(lm, n_prompt, prefill.seconds, decode.seconds),
        sweep=sweep_rows(table), table=table,
        sweep_figure=sweep_figure(lm, table, n_prompt, prefill, decode),
        repeats=table.repeats,
    )


SECTION = Section("generation", "Generation loop", PARAMS, build,
                  short="Loop",
                  warm=warm, reads=SAMPLER, shows_read_messages=True,
                  gives_away=("next-token", "kv-bytes"),
                  tour=("Generation is a loop: run the model, pick a token, append it, run again. "
                        "The first pass reads the whole prompt at once (prefill); every later pass "
                        "adds one token (decode). Watch the answer stream in, token by token, "
                        "with the time each step took."))
