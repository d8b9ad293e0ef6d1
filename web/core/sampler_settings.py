"""The sampler the page's state sets, read by the sections that sample (sampling, decoding, the
generation loop) and by the streamed answer (web/serving/streaming.py).

The Sampling section owns the controls (s_rep, s_temp, s_topk, s_topp, s_minp, s_seed); the
generation section owns the choice between them and greedy decoding (gen_choose).
"""
from pipeline.sampling import SamplerSettings, sampler
from web.core.params import Param

# The page's one default temperature, for every sampler on it (the overview's, the Sampling
# section's and the loops that borrow it): a common chat setting, below 1 so the model's own
# distribution is sharpened, and a value at which top-k and top-p visibly act (at 0, greedy, they
# change nothing). 0 (greedy) stays one move of a slider away.
DEFAULT_TEMPERATURE = 0.8


def top_p_param(name: str, default: float) -> Param:
    """A top-p control: in (0, 1], since 0 would remove every token (the Param refuses it when
    the query is parsed, naming the control)."""
    return Param(name, "Top-p", kind="float", default=default, min=0.0, max=1.0, min_open=True,
                 min_why="0 would remove every token")


def settings_from(state) -> SamplerSettings:
    """The sampler settings of the page. Their Params (web/sections/sampling.py) refuse a top-p
    or a repetition penalty of 0 with the query, so every value here can be used."""
    return SamplerSettings(repetition_penalty=state["s_rep"], temperature=state["s_temp"],
                           top_k=state["s_topk"], top_p=state["s_topp"], min_p=state["s_minp"])


# gen_choose's choices (its Param, in web/sections/generation.py, refuses any other value)
CHOOSERS = {"greedy": "the most probable one (greedy)",
            "sampler": "drawn by the page's sampler (its settings: Sampling)"}


def sampler_for(state, chooser: str = "gen_choose"):
    """The token chooser of the loop and of the stream: None (greedy, decode_loop's default)
    or pipeline.sampling.sampler with the Sampling section's settings and seed (a fresh seeded
    generator per run, so the same URL gives the same tokens). `chooser`: the Param holding the
    choice (gen_choose, the generation loop's; chat_choose, the chat's)."""
    if state[chooser] == "greedy":
        return None
    settings = settings_from(state)
    return sampler(settings, state["s_seed"])


def described(state) -> str:
    """The page's sampler in words, its settings and seed as the state holds them."""
    st = settings_from(state)
    return (f"repetition penalty {st.repetition_penalty:g}, temperature {st.temperature:g}, "
            f"top-k {st.top_k or 'off'}, top-p {st.top_p:g}, min-p {st.min_p:g}; seed "
            f"{state['s_seed']}")


def default_settings(lm) -> tuple:
    """(SamplerSettings, seed) of the page's sampler at this model's defaults (its card's own,
    LoadedModel.default_of): what the overview, the Sampling section and a sampled generation
    loop use when the URL sets none of them."""
    from web.sections.sampling import PARAMS  # the Params are declared there only
    v = {p.name: lm.default_of(p) for p in PARAMS}
    return (SamplerSettings(repetition_penalty=v["s_rep"], temperature=v["s_temp"],
                            top_k=v["s_topk"], top_p=v["s_topp"], min_p=v["s_minp"]),
            v["s_seed"])
