"""Greedy vs beam search: the search tree of real beam search on the prompt, the final beams
ranked by the model's own log-probabilities, greedy's path through the same tree, and seeded
samples (the sampler of the sampling section) beside them.

Every number is a log-probability the running model computed (pipeline/decoding.py); the
example prompt where beam search beats greedy is found by running both on a list of famous
openings, once per model.
"""
import functools
import math
import urllib.parse
from dataclasses import dataclass

from pipeline.decoding import Continuation, Extendable, beam_search, continue_batch, rescored
from pipeline.generation import most_new_tokens
from pipeline.sampling import SamplerSettings, greedy, sampler
from web.core.cache import memo, memoized, model_key
from web.core.params import Param
from web.core.sampler_settings import settings_from
from web.figures import decoding as figures
from web.model_state import greedy as shared_greedy
from web.model_state.forward import prefilled, prompt_ids
from web.presentation.tokens import token_plain, token_string
from web.presentation.tour import open_disclosures
from web.sections import Section
from web.sections.sampling import SAMPLER

MAX_WIDTH, MAX_NEW = 8, 12
N_SAMPLES = 3
SAMPLES_DISCLOSURE = "dec-beams"
# Famous openings and lines of the novels the default model was trained on: the candidates for
# "beam search finds a more probable continuation than greedy".
OPENINGS = (
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a",
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy "
    "disposition, seemed to unite some of the best blessings of",
    "No one who had ever seen Catherine Morland in her infancy would have supposed her born to",
    "Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who",
    "The family of Dashwood had long been settled in",
    "About thirty years ago Miss Maria Ward, of Huntingdon, with only seven thousand pounds, "
    "had the good luck to",
    "My dear Mr. Bennet,",
    "Mr. Darcy",
)
EXAMPLE_WIDTH, EXAMPLE_NEW = 3, 6

PARAMS = (
    Param("b_width", "Beam width", kind="int", default=3, min=1, max=MAX_WIDTH),
    Param("b_new", "New tokens", kind="int", default=6, min=1, max=MAX_NEW, big_default=4),
    Param("b_alpha", "Length penalty", kind="float", default=1.0, min=0.0, max=2.0),
)


@dataclass(frozen=True)
class Line:
    """A continuation as the page shows it."""
    label: str
    text: str             # decoded text of the new tokens
    tokens: tuple
    logprobs: tuple
    total: float
    score: float = None
    ended: bool = False   # stopped at end-of-text


# Each search starts from the prompt's shared run (web.model_state.forward.prefilled): the prompt is
# not run again for every width, length or seed. A longer search goes on from a shorter one kept
# (pipeline.decoding.beam_search's resume), a longer continuation from the one kept
# (Extendable): one more token is one more step, not a new search.
def search_bytes(search) -> int:
    """What a kept search holds beyond its tree: its last step's parents' KV caches and
    next-token log-probabilities (to go on from)."""
    if search.kept is None:
        return 0
    return sum(p.kv.allocated_nbytes + p.logprobs.nbytes for p, _ in search.kept[1])


# A big model's searches hold their beams' caches (SmolLM2: 46 KB per token per beam, up to 8
# beams): kept within a byte budget, enough for a class's prompts (a search evicted is run
# again for a length penalty moved, which only reranks it).
_searches = memo("beam searches", 32, big_size=24, big_bytes=96 << 20, weigh=search_bytes)


def tree_search(model, ids: tuple, width: int, n: int):
    """The search tree and ended hypotheses of width and n new tokens (any length penalty)."""
    def key(k):
        return (model_key(model), ids, width, k)

    def run():
        shorter = (_searches.peek(key(k)) for k in range(n - 1, 0, -1))
        prev = next((p for p in shorter if p is not None and p.kept is not None), None)
        return beam_search(model, ids, width, n, start=None if prev else prefilled(model, ids),
                           resume=prev)
    return _searches.get(key(n), run)


def cached_search(model, ids: tuple, width: int, n: int, alpha: float):
    """The search ranked with length penalty alpha (rescored: the tree does not depend on it)."""
    return rescored(tree_search(model, ids, width, n), alpha)


_continued = memo("decoding continuations", 16)


def cached_greedy(model, ids: tuple, n: int) -> Continuation:
    """Greedy's continuation, n tokens (or to the end-of-text token): the prompt's greedy run
    the other sections read too (web.model_state.greedy), made longer when asked for more. It
    does not depend on the sampling section's settings."""
    path = shared_greedy.greedy_path(model, ids, n)
    m = path.ended(n, model.config.eos_token_id)
    return Continuation(path.tokens[:m], path.logprobs[:m])


def cached_samples(model, ids: tuple, n: int, settings: SamplerSettings, seed: int):
    """N_SAMPLES seeded samples (seeds seed, seed + 1, ...), run side by side."""
    return _continued.get((model_key(model), ids, settings, seed), lambda: Extendable(
        model, ids, [sampler(settings, seed + i) for i in range(N_SAMPLES)],
        start=prefilled(model, ids))).first(n)


def samples_ready(model, ids: tuple, n: int, settings: SamplerSettings, seed: int) -> bool:
    """Whether the samples are computed already: drawing them runs no decode step."""
    kept = _continued.peek((model_key(model), ids, settings, seed))
    return kept is not None and kept.ready(n)


def samples_shown(state) -> bool:
    """The samples sit in the "dec-beams" disclosure: the template draws them only while it is
    open (the page asks for them when it opens), so a sampling control does not wait for them."""
    return SAMPLES_DISCLOSURE in open_disclosures(state)


def sample_lines(model, tok, ids: tuple, n: int, settings: SamplerSettings, seed: int) -> list:
    """The seeded samples as the page shows them (called by the template, when shown)."""
    eos = model.config.eos_token_id
    return [Line(f"seed {seed + i}", token_string(tok, c.tokens), tuple(c.tokens),
                 tuple(c.logprobs),
                 c.total, ended=c.tokens[-1] == eos)
            for i, c in enumerate(cached_samples(model, ids, n, settings, seed))]


def warm(lm):
    beam_beats_greedy(lm.model, openings(lm))


def openings(lm) -> tuple:
    """The lines searched for the example: the model card's own (SmolLM2: its famous prompts),
    else the Austen openings."""
    return (lm.card.examples if lm.card and lm.card.examples else OPENINGS)


@memoized(4)
def beam_beats_greedy(model, lines=OPENINGS) -> tuple:
    """Run greedy and beam search (width 3, 6 tokens) on every line: (prompt, greedy total,
    beam total) of the line where beam search gains the most, and the number tried; None
    when no line leaves room for the new tokens in the model's context window."""
    rows, tried = [], 0
    for prompt in lines:
        ids = tuple(model.tokenizer.encode_ordinary(prompt))
        if len(ids) + EXAMPLE_NEW > model.config.n_ctx:
            continue
        tried += 1
        g = continue_batch(model, ids, [greedy], EXAMPLE_NEW)[0]
        best = beam_search(model, ids, EXAMPLE_WIDTH, EXAMPLE_NEW, length_penalty=0.0).final[0]
        if len(best.tokens) == len(g.tokens):
            rows.append((best.total - g.total, prompt, g.total, best.total))
    if not rows:
        return None
    gain, prompt, g_total, b_total = max(rows)
    return prompt, g_total, b_total, tried


def token_name(tok, t: int) -> str:
    return token_plain(tok, t)


def build(lm, state) -> dict:
    model, tok = lm.model, lm.tokenizer
    ids = prompt_ids(lm, state["prompt"])
    width, n, alpha = state["b_width"], state["b_new"], state["b_alpha"]
    room = model.config.n_ctx - len(ids)          # positions left in the context window
    fit = most_new_tokens(len(ids), model.config.n_ctx)   # room + 1: the last is never read
    if fit <= 0:
        return dict(full=True, n_ctx=model.config.n_ctx)
    n = min(n, fit)
    search = cached_search(model, ids, width, n, alpha)
    settings = settings_from(state)
    seed = state["s_seed"]
    g = cached_greedy(model, ids, n)

    names = {node.id: token_name(tok, node.token) for node in search.nodes}
    finals = [Line(f"beam {i + 1}", token_string(tok, list(h.tokens)), h.tokens,
                   tuple(search.nodes[j].logprob for j in search.path(h.node)), h.total,
                   h.score, h.ended) for i, h in enumerate(search.final)]
    greedy_line = Line("greedy", token_string(tok, g.tokens), tuple(g.tokens), tuple(g.logprobs),
                       g.total, ended=g.tokens[-1] == model.config.eos_token_id)
    draw_samples = functools.partial(sample_lines, model, tok, tuple(ids), n, settings, seed)
    # an answer that holds the samples out of sight (a beam control's) draws them only when
    # they cost nothing; else they are asked for as they near the screen (out_of_sight)
    ready = functools.partial(samples_ready, model, tuple(ids), n, settings, seed)
    greedy_nodes = greedy_path(search, g.tokens)
    best_nodes = search.path(search.final[0].node)
    rows = [dict(step=node.step + 1, token=names[node.id], logprob=node.logprob, total=node.total,
                 status=node.status, prefix=token_string(tok, [search.nodes[j].token
                                                         for j in search.path(node.id)]))
            for node in search.nodes if node.status != "pruned"]
    pruned = [sum(1 for node in search.nodes if node.step == s and node.status == "pruned")
              for s in range(search.steps)]

    example = beam_beats_greedy(model, openings(lm))
    ex_prompt, ex_greedy, ex_beam, ex_tried = example or (None, None, None, 0)
    best = finals[0]
    gain = best.total - greedy_line.total
    return dict(
        full=False, room=room, asked=state["b_new"],
        width=width, n_new=n, alpha=alpha, steps=search.steps, finals=finals,
        greedy=greedy_line, draw_samples=draw_samples, samples_shown=samples_shown,
        samples_ready=ready,
        settings=settings, seed=seed, rows=rows,
        pruned=pruned, n_nodes=len(search.nodes), gain=gain,
        verdict=beam_vs_greedy(len(best.tokens) == len(greedy_line.tokens), gain),
        verdicts=VERDICTS,
        greedy_pruned_at=(len(greedy_nodes) if len(greedy_nodes) < len(g.tokens) else None),
        tree_figure=figures.tree_figure(search, names, greedy_nodes, best_nodes),
        ex_prompt=ex_prompt, ex_greedy=ex_greedy, ex_beam=ex_beam, ex_tried=ex_tried,
        ex_width=EXAMPLE_WIDTH, ex_new=EXAMPLE_NEW,
        ex_lines="Austen openings" if openings(lm) == OPENINGS else "prompts",
        ex_is_prompt=state["prompt"] == ex_prompt,
        # the table above was computed with the example's own settings
        ex_same=(width, n, alpha) == (EXAMPLE_WIDTH, EXAMPLE_NEW, 0.0),
        ex_url=example_url(ex_prompt) if example else None, exp=math.exp,
        eos_name=(token_name(tok, model.config.eos_token_id)
                  if model.config.eos_token_id is not None else None),
    )


VERDICTS = ("more likely", "the same", "less likely", "another length")


def beam_vs_greedy(same_length: bool, gain: float) -> str:
    """How the best beam's total log-probability compares with greedy's continuation (equal
    within 0.0005 nats counts as the same: the totals are float32 sums)."""
    if not same_length:
        return VERDICTS[3]
    if gain > 0.0005:
        return VERDICTS[0]
    return VERDICTS[1] if gain > -0.0005 else VERDICTS[2]


def greedy_path(search, tokens) -> list:
    """The tree nodes of greedy's tokens, as far as the search kept greedy's prefix."""
    out, parent = [], -1
    for step, t in enumerate(tokens):
        node = next((nd for nd in search.nodes if nd.step == step and nd.parent == parent
                     and nd.token == t), None)
        if node is None:
            break
        out.append(node.id)
        if node.status != "kept":
            break
        parent = node.id
    return out


def example_url(prompt: str) -> str:
    pairs = [("prompt", prompt), ("b_width", str(EXAMPLE_WIDTH)), ("b_new", str(EXAMPLE_NEW)),
             ("b_alpha", "0")]
    return "/?" + urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote) + "#decoding"


SECTION = Section("decoding", "Greedy vs beam search", PARAMS, build,
                  short="Beam search", shorter="Beams", warm=warm, reads=SAMPLER,
                  gives_away=("next-token", "beam-vs-greedy"),
                  tour=("Choosing the best token at each step (greedy) does not always give the "
                        "most probable whole sentence. Beam search keeps several candidates alive "
                        "and compares their total probability. The tree shows every branch it "
                        "explored and which ones it dropped."))
